package iptables

import "bytes"

// cacheHintWork is the size above which the hint pays, in comparisons of chain names:
// commands written times distinct chains named. iptables-nft 1.8.9 (nft-cache.c,
// cache_chain_list_insert) keeps the chains a --noflush restore names in a sorted linked
// list and walks it once per command (its chain and its jump target), ~20 ns a step on
// this machine's class of CPU; 1e8 steps is about a second, what a whole-table listing
// costs at 10k Services. Below it the hint would cost more than it saves.
const cacheHintWork = 1e8

// cacheHintPays estimates whether the hint makes a restore cheaper: without it the work is
// commands × distinct chains / 2, with it a listing of the table; work is the threshold
// (cacheHintWork). A full sync names every active chain; a partial one names the changed
// services' chains plus every Service's chain that KUBE-SERVICES jumps to (about one per
// service port).
func cacheHintPays(g Result, full bool, servicePorts int, work float64) bool {
	chains := len(g.Active)
	if !full {
		chains = servicePorts + 3*g.ChangedServices
		work *= partialHintFactor
	}
	return float64(g.Rules)*float64(chains) >= work
}

// partialHintFactor raises the threshold for partial restores, whose walks are cheaper
// than the estimate (most of the chains they name are only declared). Measured here on
// 2026-12-02, one changed Service, median of 5, two runs each way: without the hint
// 8k 461-467 ms, 10k 684-713, 12k 968-1015, 15k 1536-1637; with it 460-478, 893-908,
// 1084-1108, 1455-1466. So the hint pays from about 13.5k Services, (13.5k)^2 ≈ 1.8e8
// steps; at 10k, with the plain threshold, it made our partial sync 10% slower than
// kube-proxy's. Full syncs keep the plain threshold: at 3k Services the hint took one
// from 1.95 s to 0.56 s (at 2k it was not used, 0.94-1.0 s either way).
const partialHintFactor = 1.8

// withCacheHint returns input with a chainless `-S` as the nat table's first command.
// A command without a chain makes iptables-nft fetch every chain of the table (the
// request's all_chains) instead of growing its per-chain list; -S is the one chainless
// command with no effect on the kernel (it lists the table; the listing is discarded).
// Input without a nat table is returned unchanged.
func withCacheHint(input []byte) []byte {
	const header = "*nat\n"
	i := 0
	if !bytes.HasPrefix(input, []byte(header)) {
		i = bytes.Index(input, []byte("\n"+header))
		if i < 0 {
			return input
		}
		i++
	}
	i += len(header)
	out := make([]byte, 0, len(input)+3)
	out = append(out, input[:i]...)
	out = append(out, "-S\n"...)
	return append(out, input[i:]...)
}
