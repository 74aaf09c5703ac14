//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/all"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// kernelBackends are the backends of this kernel whose state the restart and tampering
// tests compare (IPVS: backends/ipvs, in the microVM).
func kernelBackends() []string { return []string{"iptables", "iptables-legacy", "nftables"} }

// requireBackend skips (or fails) unless the tools of backend are present.
func requireBackend(t *testing.T, backend string) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "conntrack")
	switch backend {
	case "iptables":
		testutil.RequireBinary(t, "iptables-nft", "iptables-nft-restore", "iptables-nft-save")
	case "iptables-legacy":
		testutil.RequireBinary(t, "iptables-legacy", "iptables-legacy-restore", "iptables-legacy-save")
	case "nftables":
		testutil.RequireBinary(t, "nft")
	}
}

// nodeAgent is an agent with a real backend in its own namespace.
type nodeAgent struct {
	*Agent
	path string
}

// newNodeAgent returns an agent for node "node-a" programming the namespace at path (a new
// one when path is empty) with a new backend instance: what a restarted kube-proxy is.
func newNodeAgent(t *testing.T, backend, path string, checkPeriod time.Duration) nodeAgent {
	t.Helper()
	if path == "" {
		_, path = testutil.NewNetNS(t)
	}
	be, err := all.New(backend, all.Node{Name: "node-a", NetNSPath: path, StateDir: t.TempDir()}, all.Settings{})
	require.NoError(t, err)
	a := New(Config{
		Node:        backends.NodeView{Name: "node-a", IPs: nodeIPs("10.0.0.1")},
		View:        backends.ViewOptions{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")},
		Backend:     be,
		SyncPeriod:  time.Minute,
		CheckPeriod: checkPeriod,
	})
	return nodeAgent{Agent: a, path: path}
}

// objectsOld and objectsNew are the cluster before and after the restart: one service
// loses an endpoint, one goes away, one appears.
func objectsOld() []Change {
	return []Change{
		{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1},
		{Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}, "10.244.1.2", "10.244.1.3"), ResourceVersion: 2},
		{Service: bt.ServiceObject("b", "10.96.0.11", bt.TCPPort("http", 80)), ResourceVersion: 3},
		{Slice: bt.SliceObject("b-1", "b", "http", 8080, time.Time{}, "10.244.2.2"), ResourceVersion: 4},
		{Service: bt.ServiceObject("c", "10.96.0.12", bt.TCPPort("http", 80)), ResourceVersion: 5},
		{Slice: bt.SliceObject("c-1", "c", "http", 8080, time.Time{}, "10.244.3.2", "10.244.3.3", "10.244.3.4"), ResourceVersion: 6},
	}
}

func objectsNew() []Change {
	return []Change{
		{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 11},
		{Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}, "10.244.1.3"), ResourceVersion: 12},
		{Service: bt.ServiceObject("b", "10.96.0.11", bt.TCPPort("http", 80)), ResourceVersion: 13},
		{Slice: bt.SliceObject("b-1", "b", "http", 8080, time.Time{}, "10.244.2.2"), ResourceVersion: 14},
		{Service: bt.ServiceObject("d", "10.96.0.13", bt.TCPPort("http", 80)), ResourceVersion: 15},
		{Slice: bt.SliceObject("d-1", "d", "http", 8080, time.Time{}, "10.244.4.2", "10.244.4.3"), ResourceVersion: 16},
	}
}

func observeAll(a *Agent, cs []Change) {
	for _, c := range cs {
		a.Observe(c)
	}
}

// kernelState returns what the backend owns in the namespace, normalised so that two
// kernels that behave the same compare equal: iptables-save of filter, nat and mangle
// without counters and comments, chains sorted, rules in order within their chain; or
// `nft -j list table ip kube-proxy` without handles, objects sorted, rules in order
// within their chain, set and map elements sorted.
func kernelState(t *testing.T, backend, path string) string {
	t.Helper()
	run := func(bin string, args ...string) string {
		out, err := netns.Exec(context.Background(), path, netns.Command{Path: bin, Args: args})
		require.NoError(t, err)
		return string(out.Stdout)
	}
	switch backend {
	case "iptables", "iptables-legacy":
		bin := "iptables-nft-save"
		if backend == "iptables-legacy" {
			bin = "iptables-legacy-save"
		}
		var b strings.Builder
		for _, table := range []string{"filter", "nat", "mangle"} {
			b.WriteString(normalizeIptablesSave(run(bin, "-t", table)))
		}
		return b.String()
	case "nftables":
		out, err := netns.Exec(context.Background(), path, netns.Command{Path: "nft", Args: []string{"-j", "list", "table", "ip", "kube-proxy"}})
		if err != nil && strings.Contains(err.Error(), "No such file or directory") {
			return "(no table ip kube-proxy)"
		}
		require.NoError(t, err)
		return normalizeNFTJSON(t, string(out.Stdout))
	}
	require.FailNow(t, "no kernel state dump for "+backend)
	return ""
}

func normalizeIptablesSave(dump string) string {
	var out strings.Builder
	var chains []string
	rules := map[string][]string{}
	for _, l := range strings.Split(dump, "\n") {
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, ":"):
			if i := strings.LastIndex(l, " ["); i > 0 {
				l = l[:i] // ":CHAIN POLICY [packets:bytes]"
			}
			chains = append(chains, l)
		case strings.HasPrefix(l, "-A "):
			chain := strings.Fields(l)[1]
			rules[chain] = append(rules[chain], l)
		case l == "COMMIT":
			slices.Sort(chains)
			for _, c := range chains {
				out.WriteString(c + "\n")
				for _, r := range rules[strings.Fields(c[1:])[0]] {
					out.WriteString(r + "\n")
				}
			}
			out.WriteString("COMMIT\n")
			chains, rules = nil, map[string][]string{}
		default:
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// normalizeNFTJSON turns `nft -j list table` output into sorted lines, one per object.
func normalizeNFTJSON(t *testing.T, s string) string {
	t.Helper()
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	require.NoError(t, json.Unmarshal([]byte(s), &doc))
	var lines []string
	ruleIndex := map[string]int{}
	for _, obj := range doc.Nftables {
		for kind, v := range obj {
			if kind == "metainfo" {
				continue
			}
			delete(v, "handle")
			key := kind
			switch kind {
			case "rule":
				chain := fmt.Sprint(v["chain"])
				key = fmt.Sprintf("rule %s #%d", chain, ruleIndex[chain])
				ruleIndex[chain]++
			case "set", "map":
				if elems, ok := v["elem"].([]any); ok {
					strs := make([]string, len(elems))
					for i, e := range elems {
						b, err := json.Marshal(e)
						require.NoError(t, err)
						strs[i] = string(b)
					}
					slices.Sort(strs)
					v["elem"] = strs
				}
			}
			b, err := json.Marshal(v)
			require.NoError(t, err)
			lines = append(lines, key+" "+string(b))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestRestartFirstSyncEqualsFreshSync: an agent programs the old cluster and stops; a new
// agent (new backend instance, as after a kube-proxy restart) on the same node, with the
// old rules still in the kernel, syncs the new cluster once. The kernel then holds exactly
// what a fresh agent's first full sync of the new cluster writes into an empty namespace.
func TestRestartFirstSyncEqualsFreshSync(t *testing.T) {
	for _, backend := range kernelBackends() {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			old := newNodeAgent(t, backend, "", -1)
			observeAll(old.Agent, objectsOld())
			rec := old.SyncNow(ctx)
			require.NoError(t, rec.Err)
			oldState := kernelState(t, backend, old.path)

			restarted := newNodeAgent(t, backend, old.path, -1)
			observeAll(restarted.Agent, objectsNew())
			rec = restarted.SyncNow(ctx)
			require.NoError(t, rec.Err)
			assert.True(t, rec.Result.Full, "the first sync after a restart is full")

			fresh := newNodeAgent(t, backend, "", -1)
			observeAll(fresh.Agent, objectsNew())
			rec = fresh.SyncNow(ctx)
			require.NoError(t, rec.Err)

			want := kernelState(t, backend, fresh.path)
			assert.NotEqual(t, oldState, want, "the two clusters must program different rules, or the test proves nothing")
			assert.Equal(t, want, kernelState(t, backend, restarted.path))
		})
	}
}
