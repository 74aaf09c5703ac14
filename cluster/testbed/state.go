//go:build linux

package testbed

import (
	"context"
	"fmt"
	"io"
	"strings"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab"
)

// stateCommands are what WriteNodeState runs in each node's namespace for backend, as
// its facts say (backends/all): its rule dump, then what explains a packet's fate beyond
// the rules (IPVS's connection table, with the state and expiry of every entry;
// conntrack's flows). An unknown backend gets conntrack's flows only.
func stateCommands(backend string) []netns.Command {
	if f, ok := all.Lookup(backend); ok {
		return f.NodeState()
	}
	return []netns.Command{{Path: "conntrack", Args: []string{"-L"}}}
}

// WriteNodeState writes, for every node of the testbed, the output of its backend's rule
// dump, IPVS's connection table (IPVS backends) and conntrack's flows, each under a header
// naming the node and the command. A command that fails is reported in place and the
// others still run: this is what a failed expectation leaves to be read afterwards.
//
// Equivalent to, per node: `ip netns exec $ns sh -c 'ipvsadm -Ln; ipvsadm -Ln --stats;
// ipvsadm -Lnc; conntrack -L'` (or iptables-nft-save, nft list table ip kube-proxy).
func (tb *Testbed) WriteNodeState(ctx context.Context, w io.Writer) error {
	for _, node := range tb.Hosts(lab.KindNode) {
		for _, cmd := range stateCommands(tb.Backend()) {
			if _, err := fmt.Fprintf(w, "### %s (%s): %s\n", node.Name, tb.Backend(), cmd); err != nil {
				return fmt.Errorf("node state: %w", err)
			}
			res, err := tb.Settings().Tools(node.NetNSPath).Exec(ctx, cmd)
			out := string(res.Stdout)
			if cmd.Path == "conntrack" {
				out = dropScrapeFlows(out)
			}
			if err != nil {
				out += fmt.Sprintf("(failed: %v)\n", err) // the error carries stderr
			} else {
				out += string(res.Stderr)
			}
			if _, err := io.WriteString(w, out+"\n"); err != nil {
				return fmt.Errorf("node state: %w", err)
			}
		}
	}
	return nil
}

// dropScrapeFlows removes from a `conntrack -L` listing the flows of the bench's own
// scrapes of kube-proxy's /metrics (hundreds per minute, all to port 10249) and says how
// many it removed.
func dropScrapeFlows(listing string) string {
	scrape := fmt.Sprintf(" dport=%d ", kubeproxy.MetricsPort)
	var b strings.Builder
	dropped := 0
	for _, line := range strings.SplitAfter(listing, "\n") {
		if strings.Contains(originalTuple(line), scrape) {
			dropped++
			continue
		}
		b.WriteString(line)
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "(left out: %d flow(s) of the bench's own scrapes of kube-proxy's /metrics)\n", dropped)
	}
	return b.String()
}

// originalTuple is the original direction of a conntrack flow line: up to its second
// "src=", where the reply direction starts, and the space before it.
func originalTuple(line string) string {
	first := strings.Index(line, " src=")
	if first < 0 {
		return line
	}
	if second := strings.Index(line[first+1:], " src="); second >= 0 {
		return line[:first+2+second] // with the space before the reply
	}
	return line
}

// KernelRules counts what a backend left in node 0's kernel, as the backend's facts say
// (backends/all): `-A` rules in iptables-save for the iptables modes and userspace (all
// tables), rules plus map and set elements of `table ip kube-proxy` for nftables, virtual
// plus real servers for IPVS.
//
// Equivalent to: `iptables-save | grep -c '^-A'`, `nft list table ip kube-proxy` or
// `ipvsadm -Ln`.
func (tb *Testbed) KernelRules(ctx context.Context) (int, error) {
	node := tb.Hosts(lab.KindNode)[0]
	f, ok := all.Lookup(tb.Backend())
	if !ok {
		return 0, fmt.Errorf("rules: no way to count %s rules", tb.Backend())
	}
	n, err := f.KernelRules(ctx, node.NetNSPath, tb.Settings())
	if err != nil {
		return 0, fmt.Errorf("rules on %s: %w", node.Name, err)
	}
	return n, nil
}
