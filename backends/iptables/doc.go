// Package iptables is the "iptables" proxy backend: kube-proxy's iptables mode, rule for
// rule, applied with iptables-restore (nft or legacy flavour).
//
// Generation (Generator, pure code, golden-tested) follows kube-proxy's syncProxyRules
// (1.28+): the same chains (KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-FORWARD,
// KUBE-NODEPORTS, KUBE-PROXY-FIREWALL in filter; KUBE-SERVICES, KUBE-NODEPORTS,
// KUBE-POSTROUTING, KUBE-MARK-MASQ and the per-service KUBE-SVC/SVL/EXT/FW/SEP chains in
// nat; KUBE-PROXY-CANARY in filter, nat and mangle), the same argument order, comments and
// chain-name hashes, so a dump reads like a real node's. Where this package differs:
//
//   - Service port names hash and print as backends.ServicePortName.String(), which always
//     has the colon ("default/inference-service-0:"), as the kube-proxy that wrote the seed
//     examples/inference-iptables-save.txt did; current kube-proxy drops the colon for an
//     unnamed port.
//   - KUBE-MARK-DROP (mark 0x8000) is still created in nat, as in the seed dump; kube-proxy
//     1.28+ no longer writes it and nothing jumps to it.
//   - nodePortAddresses is not modelled: NodePorts match `-m addrtype --dst-type LOCAL`.
//   - An externally reachable service always gets its cluster endpoints (kube-proxy's
//     UsesClusterEndpoints), even when both traffic policies are Local; see categorize.
//
// Application (Backend): one `iptables-restore -w --noflush --counters` per sync, inside the
// node's namespace, with XTABLES_LOCKFILE set per node. Partial syncs write only the chains
// of service ports that changed since the last successful sync; stale chains are found by
// comparing with the chains of that sync (and, on the first sync, with `iptables-save -t
// nat`), not by an iptables-save per sync. The jumps from built-in chains are ensured on
// full syncs only, with `iptables -C`/`-I` calls like kube-proxy's EnsureRule.
package iptables
