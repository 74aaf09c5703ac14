//go:build linux

package measure

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"kpbench.dev/kpbench/lab/netns"
	"kpbench.dev/kpbench/scenarios/testbed"
)

// KernelRules counts what a backend left in node 0's kernel: `-A` rules in iptables-save
// for the iptables modes and userspace (all tables), rules plus map and set elements of
// `table ip kube-proxy` for nftables, virtual plus real servers for IPVS.
//
// Equivalent to: `iptables-save | grep -c '^-A'`, `nft list table ip kube-proxy` or
// `ipvsadm -Ln`.
func KernelRules(ctx context.Context, tb *testbed.Testbed) (int, error) {
	node := tb.Lab.Hosts("node")[0]
	var cmd netns.Command
	switch tb.Backend() {
	case "iptables", "userspace":
		cmd = netns.Command{Path: "iptables-nft-save"}
	case "ipvs":
		cmd = netns.Command{Path: "ipvsadm", Args: []string{"-Ln"}}
	case "iptables-legacy", "iptables-perrule":
		cmd = netns.Command{Path: "iptables-legacy-save"}
	case "nftables":
		cmd = netns.Command{Path: "nft", Args: []string{"list", "table", "ip", "kube-proxy"}}
	default:
		return 0, fmt.Errorf("rules: no way to count %s rules", tb.Backend())
	}
	res, err := netns.Exec(ctx, node.NetNSPath, cmd)
	if err != nil {
		return 0, fmt.Errorf("rules on %s: %w", node.Name, err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	nft := cmd.Path == "nft"
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case cmd.Path == "ipvsadm":
			if strings.HasPrefix(line, "TCP ") || strings.HasPrefix(line, "UDP ") || strings.HasPrefix(line, "SCTP ") || strings.HasPrefix(line, "-> ") && !strings.HasPrefix(line, "-> RemoteAddress") {
				n++
			}
		case !nft && strings.HasPrefix(line, "-A "):
			n++
		case nft && line != "" && !strings.HasSuffix(line, "{") && line != "}" &&
			!strings.HasPrefix(line, "type ") && !strings.HasPrefix(line, "flags ") && !strings.HasPrefix(line, "comment "):
			// a rule, or a line of map/set elements: count the elements it holds
			if strings.HasPrefix(line, "elements = {") || strings.HasSuffix(line, ",") || strings.HasSuffix(line, "}") {
				n += strings.Count(line, ",") + 1
			} else {
				n++
			}
		}
	}
	return n, sc.Err()
}

// Slab returns the kernel's slab memory in bytes (host-wide, from /proc/meminfo). Rule
// memory is read as the growth of Slab across a ladder step: noisy on a shared machine,
// but it is what netfilter's rule blobs, nft objects and conntrack cost.
func Slab() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Slab:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no Slab line in /proc/meminfo")
}
