//go:build linux

package all

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/netns/netnstest"
	"kpbench.dev/kpbench/internal/testutil"
)

// allTools are every external tool a backend may run: the fake roots hold them all.
var allTools = []string{
	"nft", "ipset", "conntrack", "ipvsadm",
	"iptables", "iptables-nft", "iptables-nft-save", "iptables-nft-restore",
	"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore",
}

// rootState is one TCP and one UDP Service with an endpoint each.
func rootState() *backends.State {
	st := bt.State(
		bt.With(bt.Service("ns/web", "10.96.0.10:80", bt.EP("10.244.1.2:8080")), func(sp *backends.ServicePort) { sp.NodePort = 30080 }),
		bt.Service("ns/dns/udp", "10.96.0.11:53", bt.EP("10.244.1.3:8080")),
	)
	st.NodeIPs = []netip.Addr{netip.MustParseAddr("172.18.0.10")}
	st.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	return st
}

// kernelRuleset is what the host's tools see of rules in the namespace at nsPath: every
// iptables chain of ours (both flavours) and nftables' whole ruleset.
func kernelRuleset(t *testing.T, nsPath string) string {
	t.Helper()
	var b strings.Builder
	for _, c := range []netns.Command{{Path: "iptables-nft-save"}, {Path: "iptables-legacy-save"}, {Path: "nft", Args: []string{"list", "ruleset"}}} {
		res, err := netns.Exec(context.Background(), nsPath, c)
		require.NoError(t, err, c.String())
		for _, l := range strings.Split(string(res.Stdout), "\n") {
			if strings.Contains(l, "KUBE-") || strings.HasPrefix(l, "table ") {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// TestBackendsRunEveryToolFromTheRoot: with a tool root, every tool a backend runs comes
// from the root (nft through knftables' transactions, go-iptables' iptables, iptables-*
// restore and save, ipset), none from the host: the root's tools are fakes that program
// nothing, so the node's kernel, read with the host's tools, stays empty.
func TestBackendsRunEveryToolFromTheRoot(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-nft-save", "iptables-legacy-save", "nft")
	want := map[string][]string{
		"iptables":         {"iptables-nft", "iptables-nft-save", "iptables-nft-restore"},
		"iptables-legacy":  {"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore"},
		"iptables-perrule": {"iptables-legacy"},
		"userspace":        {"iptables-nft-restore", "iptables-nft"},
		"nftables":         {"nft"},
		"ipvs":             {"ipset", "iptables-nft-save", "iptables-nft-restore"},
	}
	for _, f := range Registered() {
		if f.Caps.NeedsAPIServer {
			continue // refuses a root: see TestUpstreamRefusesARoot
		}
		t.Run(f.Name, func(t *testing.T) {
			_, nsPath := testutil.NewNetNS(t)
			root := netnstest.NewFakeRoot(t, nil, allTools...)
			s := Settings{ToolRoot: root.Dir}
			b, err := New(f.Name, Node{Name: "node-0", NetNSPath: nsPath, StateDir: t.TempDir()}, s)
			if errors.Is(err, ipvs.ErrNoIPVS) && os.Getenv("KPBENCH_REQUIRE_IPVS") != "1" {
				t.Skip("kernel has no IPVS: make test-vm checks ipvs inside the microVM")
			}
			require.NoError(t, err)
			_, err = b.Sync(context.Background(), rootState())
			require.NoError(t, err)
			require.NoError(t, b.Cleanup(context.Background()))
			if c, ok := b.(interface{ Close() }); ok {
				c.Close()
			}
			assert.Subset(t, root.Tools(t), want[f.Name], "calls: %v", root.Calls(t))
			assert.Empty(t, kernelRuleset(t, nsPath), "a host tool wrote rules")

			// What the measurements and node states run goes to the root too.
			_, err = f.DumpRules(context.Background(), nsPath, s)
			require.NoError(t, err)
			for _, c := range f.Dump {
				assert.Contains(t, root.Calls(t), c.String())
			}
		})
	}
}

// TestUpstreamRefusesARoot: kube-proxy runs its own tools, so a root would silently not
// apply to it.
func TestUpstreamRefusesARoot(t *testing.T) {
	_, err := New("kube-proxy-nftables", Node{Name: "node-0"}, Settings{ToolRoot: "/nonexistent"})
	assert.ErrorContains(t, err, "a tool root (/nonexistent) is not supported for upstream kube-proxy")
}

// TestLegacyLockInsideTheRoot: chrooted legacy iptables reads XTABLES_LOCKFILE inside the
// root, so the lock lives there, one per node and lab.
func TestLegacyLockInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	a, err := lockFile(Node{Name: "node-0", StateDir: "/tmp/lab-a"}, Settings{ToolRoot: root})
	require.NoError(t, err)
	b, err := lockFile(Node{Name: "node-0", StateDir: "/tmp/lab-b"}, Settings{ToolRoot: root})
	require.NoError(t, err)
	assert.Regexp(t, `^/run/kpbench/xtables-node-0-[0-9a-f]{8}\.lock$`, a)
	assert.NotEqual(t, a, b)
	assert.DirExists(t, filepath.Join(root, "run", "kpbench"))
	host, err := lockFile(Node{Name: "node-0", StateDir: "/tmp/lab-a"}, Settings{})
	require.NoError(t, err)
	assert.Equal(t, "/tmp/lab-a/xtables-node-0.lock", host)
}

// TestToolVersions: versions come from the root's tools, run as the backends run them; a
// tool the root lacks is absent, and named in the error.
func TestToolVersions(t *testing.T) {
	testutil.RequireRoot(t)
	root := netnstest.NewFakeRoot(t, nil, "nft", "iptables", "ipset", "conntrack")
	got, err := ToolVersions(context.Background(), root.Dir)
	require.ErrorContains(t, err, "ipvsadm --version")
	assert.Equal(t, map[string]string{
		"nft": "nft v9.8.7 (fake)", "iptables": "iptables v9.8.7 (fake)",
		"ipset": "ipset v9.8.7 (fake)", "conntrack": "conntrack v9.8.7 (fake)",
	}, got)
	left, err := netns.List(netns.TestPrefix)
	require.NoError(t, err)
	for _, n := range left {
		assert.NotContains(t, n, "-tools", "the throwaway namespace is removed")
	}
}

// DebianTrixieRoot is where `kpbench tools prepare debian:trixie` puts its root.
const DebianTrixieRoot = "/var/cache/kpbench/tools/debian-trixie/root"

// requireTrixie skips unless the Debian trixie root exists, or fails under
// KPBENCH_REQUIRE_TOOLS=1 or KPBENCH_REQUIRE_PRIVILEGED=1 (make test prepares it first:
// make tools-matrix).
func requireTrixie(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := os.Stat(filepath.Join(DebianTrixieRoot, "usr", "sbin", "nft")); err != nil {
		msg := "needs the Debian trixie tool root at " + DebianTrixieRoot + ": run `kpbench tools prepare debian:trixie`"
		if os.Getenv("KPBENCH_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s (and KPBENCH_REQUIRE_TOOLS=1 forbids skipping): %v", msg, err)
		}
		testutil.Missing(t, msg+" (make tools-matrix)")
	}
	return DebianTrixieRoot
}

// TestDebianTrixieRoot programs each native backend with Debian trixie's tools and reads
// the rules back with them: the root's nft is 1.1.x (the host's is 1.0.6).
func TestDebianTrixieRoot(t *testing.T) {
	root := requireTrixie(t)
	versions, err := ToolVersions(context.Background(), root)
	if err != nil && !HasIPVS() {
		// ipvsadm --version fails where the kernel has no IPVS ("Can't initialize ipvs")
		assert.ErrorContains(t, err, "ipvsadm --version")
		assert.NotContains(t, versions, "ipvsadm")
		err = nil
	}
	require.NoError(t, err)
	t.Logf("trixie tools: %v", versions)
	assert.Regexp(t, regexp.MustCompile(`^nftables v1\.1\.`), versions["nft"])
	for _, name := range []string{"iptables", "iptables-legacy", "nftables", "userspace", "iptables-perrule"} {
		t.Run(name, func(t *testing.T) {
			_, nsPath := testutil.NewNetNS(t)
			s := Settings{ToolRoot: root}
			f, _ := Lookup(name)
			b, err := New(name, Node{Name: "node-0", NetNSPath: nsPath, StateDir: t.TempDir()}, s)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Cleanup(context.Background()) })
			_, err = b.Sync(context.Background(), rootState())
			require.NoError(t, err)
			n, err := f.KernelRules(context.Background(), nsPath, s)
			require.NoError(t, err)
			assert.Positive(t, n, "rules read back with the root's %s", f.Dump)
			dump, err := f.DumpRules(context.Background(), nsPath, s)
			require.NoError(t, err)
			assert.Contains(t, string(dump), "10.96.0.10")
		})
	}
}
