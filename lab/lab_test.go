//go:build linux

package lab

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab/probe"
)

// newTestLab builds a lab with a random name and removes it in t.Cleanup.
func newTestLab(t *testing.T, cfg Config) *Lab {
	t.Helper()
	testutil.RequireRoot(t)
	if cfg.Name == "" {
		cfg.Name = "t" + testutil.RandomID(t, 6)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := Up(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Down(context.Background())) })
	return l
}

func request(t *testing.T, l *Lab, from string, to netip.AddrPort, proto Protocol) probe.Result {
	t.Helper()
	pr, err := l.Prober(from)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return pr.Request(ctx, probe.Destination{Addr: to, Protocol: proto}, probe.Options{Timeout: 3 * time.Second})
}

func TestLabTraffic(t *testing.T) {
	l := newTestLab(t, Config{Nodes: 2, PodsPerNode: 2, Clients: 1})
	pods := l.Hosts(KindPod)
	require.Len(t, pods, 4)
	byNode := map[string][]Host{}
	for _, p := range pods {
		byNode[p.Node] = append(byNode[p.Node], p)
	}
	a0, a1, b0 := byNode["node-0"][0], byNode["node-0"][1], byNode["node-1"][0]
	node0, _ := l.Host("node-0")
	client, _ := l.Host("client-0")

	tests := []struct {
		name      string
		from      string
		fromIP    netip.Addr
		to        Host
		proto     Protocol
		wantNodeS string
	}{
		{"pod to pod on one node", a0.Name, a0.IP, a1, TCP, "node-0"},
		{"pod to pod across nodes", a0.Name, a0.IP, b0, TCP, "node-1"},
		{"node to pod", "node-0", node0.PodCIDR.Addr().Next(), a1, TCP, "node-0"},
		{"node to pod on another node", "node-0", node0.IP, b0, TCP, "node-1"},
		{"udp pod to pod across nodes", b0.Name, b0.IP, a0, UDP, "node-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := request(t, l, tt.from, netip.AddrPortFrom(tt.to.IP, 8080), tt.proto)
			require.NoError(t, res.Err)
			assert.Equal(t, tt.to.Name, res.Answer.Pod, "answered by the pod addressed")
			assert.Equal(t, tt.wantNodeS, res.Answer.Node)
			assert.Equal(t, tt.fromIP, res.Answer.Client.Addr(), "pod sees the sender's own address (no NAT in a bare lab)")
		})
	}

	t.Run("client reaches a node", func(t *testing.T) {
		// Nothing listens on the node: a RST back proves the client reaches it.
		res := request(t, l, "client-0", netip.AddrPortFrom(node0.IP, 9), TCP)
		assert.Equal(t, probe.Refused, res.Class, "%v", res.Err)
	})
	t.Run("client does not reach pods directly", func(t *testing.T) {
		// Node 0 forwards, but node-1's pods have no route back to the client: outside the
		// cluster, pods are only reachable through services.
		res := request(t, l, "client-0", netip.AddrPortFrom(b0.IP, 8080), TCP)
		assert.Equal(t, probe.Unreachable, res.Class, "%v", res.Err)
	})
	t.Run("client reaches routed prefixes through node 0", func(t *testing.T) {
		// With a route to node-1's pod block, the client gets there through node 0.
		require.NoError(t, l.AddClientRoute(context.Background(), netip.PrefixFrom(b0.IP, 32)))
		res := request(t, l, "client-0", netip.AddrPortFrom(b0.IP, 8080), TCP)
		require.NoError(t, res.Err)
		assert.Equal(t, client.IP, res.Answer.Client.Addr())
	})
}

func TestLabPodLifecycle(t *testing.T) {
	l := newTestLab(t, Config{Nodes: 1, PodsPerNode: 0})
	ctx := context.Background()
	h, err := l.AddPod(ctx, PodSpec{Name: "web-1", Node: "node-0", Ports: []Port{{Number: 80, Protocol: TCP}, {Number: 53, Protocol: UDP}}})
	require.NoError(t, err)
	assert.True(t, h.Ready)
	res := request(t, l, "node-0", netip.AddrPortFrom(h.IP, 80), TCP)
	require.NoError(t, res.Err)
	res = request(t, l, "node-0", netip.AddrPortFrom(h.IP, 53), UDP)
	require.NoError(t, res.Err)
	assert.Equal(t, "web-1", res.Answer.Pod)

	require.NoError(t, l.SetPodConditions("web-1", false, true))
	rec, err := l.registry.Read(l.Name())
	require.NoError(t, err)
	hr, ok := rec.Host("web-1")
	require.True(t, ok)
	assert.False(t, hr.Ready, "not-ready marking is visible in status")
	assert.True(t, hr.Terminating)

	_, err = l.AddPod(ctx, PodSpec{Name: "web-1", Node: "node-0"})
	assert.ErrorContains(t, err, "already exists")
	_, err = l.AddPod(ctx, PodSpec{Name: "web-2", Node: "node-9"})
	assert.ErrorContains(t, err, "no node")

	require.NoError(t, l.RemovePod(ctx, "web-1"))
	_, err = os.Stat(netns.Path(h.NetNS))
	assert.ErrorIs(t, err, os.ErrNotExist)
	res = request(t, l, "node-0", netip.AddrPortFrom(h.IP, 80), TCP)
	assert.NotEqual(t, probe.OK, res.Class)
}

// rootSnapshot reads (never writes) what the host's root namespace has: rules, addresses
// and routes.
func rootSnapshot(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{{"iptables-save"}, {"iptables-legacy-save"}, {"nft", "list", "ruleset"}} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			continue
		}
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		require.NoError(t, err, argv)
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ":") {
				continue // timestamps and counters change by themselves
			}
			b.WriteString(line + "\n")
		}
	}
	links, err := netlink.LinkList()
	require.NoError(t, err)
	for _, lk := range links {
		b.WriteString("link " + lk.Attrs().Name + "\n")
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	require.NoError(t, err)
	for _, a := range addrs {
		b.WriteString("addr " + a.IPNet.String() + "\n")
	}
	routes, err := netlink.RouteList(nil, netlink.FAMILY_ALL)
	require.NoError(t, err)
	for _, r := range routes {
		b.WriteString("route " + r.String() + "\n")
	}
	return b.String()
}

func TestLabLeavesNothingAndRootUntouched(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-save", "nft")
	before := rootSnapshot(t)
	name := "t" + testutil.RandomID(t, 6)
	ctx := context.Background()
	l, err := Up(ctx, Config{Name: name, Nodes: 2, PodsPerNode: 3, Clients: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Down(ctx) })
	assert.Len(t, mustList(t, "kpb-"+name+"-"), 1+2+6+1)
	require.NoError(t, l.Down(ctx))

	assert.Empty(t, mustList(t, "kpb-"+name+"-"), "namespaces left behind")
	_, err = l.registry.Read(name)
	assert.ErrorIs(t, err, ErrNotRegistered, "registry record left behind")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), "kpb-"+name+"-", "namespace mounts left behind")
	assert.Equal(t, before, rootSnapshot(t), "the host's root namespace changed")
}

func mustList(t *testing.T, prefix string) []string {
	t.Helper()
	names, err := netns.List(prefix)
	require.NoError(t, err)
	return names
}

func TestTwoLabsCoexist(t *testing.T) {
	a := newTestLab(t, Config{Nodes: 1, PodsPerNode: 1})
	b := newTestLab(t, Config{Nodes: 1, PodsPerNode: 1})
	pa, pb := a.Hosts(KindPod)[0], b.Hosts(KindPod)[0]
	require.Equal(t, pa.IP, pb.IP, "same addressing plan in both labs")
	ra := request(t, a, "node-0", netip.AddrPortFrom(pa.IP, 8080), TCP)
	rb := request(t, b, "node-0", netip.AddrPortFrom(pb.IP, 8080), TCP)
	require.NoError(t, ra.Err)
	require.NoError(t, rb.Err)
	assert.Equal(t, pa.Name, ra.Answer.Pod)
	assert.Equal(t, pb.Name, rb.Answer.Pod)
	// Removing one leaves the other working.
	require.NoError(t, a.Down(context.Background()))
	rb = request(t, b, "node-0", netip.AddrPortFrom(pb.IP, 8080), TCP)
	require.NoError(t, rb.Err)
}

func TestDownAllSweepsStaleAndSparesLive(t *testing.T) {
	live := newTestLab(t, Config{Nodes: 1, PodsPerNode: 0})
	reg := Registry{Dir: DefaultRegistryDir}

	// A stale lab: its owner is a process that has exited.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	stale := "t" + testutil.RandomID(t, 6)
	require.NoError(t, reg.Write(&Record{Entry: Entry{Name: stale, PID: dead.Process.Pid, State: StateReady}}))
	_, err := netns.Create("kpb-" + stale + "-node-0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Delete("kpb-" + stale + "-node-0"); _ = reg.Remove(stale) })

	res, err := DownAll(reg, DownOptions{})
	require.NoError(t, err)
	assert.Contains(t, res.Removed, stale)
	assert.Contains(t, res.Refused, live.Name())
	assert.Empty(t, mustList(t, "kpb-"+stale+"-"))
	assert.Len(t, mustList(t, "kpb-"+live.Name()+"-"), 2, "a live lab is left alone without --force")
}

// TestDownAllSparesLabsOfOtherRegistries: a sweep with a registry that does not know a lab
// must not take the lab's namespaces for orphans while the lab's owner, recorded in another
// registry, runs; once that owner is gone they are orphans.
func TestDownAllSparesLabsOfOtherRegistries(t *testing.T) {
	testutil.RequireRoot(t)
	other := Registry{Dir: t.TempDir()}
	empty := Registry{Dir: t.TempDir()}
	name := "t" + testutil.RandomID(t, 6)
	ns := "kpb-" + name + "-node-0"
	require.NoError(t, other.Write(&Record{Entry: Entry{Name: name, PID: os.Getpid(), State: StateReady}}))
	_, err := netns.Create(ns)
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Delete(ns) })

	res, err := DownAll(empty, DownOptions{})
	require.NoError(t, err)
	assert.NotContains(t, res.Orphans, ns, "a live lab of another registry is no orphan")
	assert.Equal(t, []string{ns}, mustList(t, ns))

	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	require.NoError(t, other.Write(&Record{Entry: Entry{Name: name, PID: dead.Process.Pid, State: StateReady}}))
	res, err = DownAll(empty, DownOptions{})
	require.NoError(t, err)
	assert.Contains(t, res.Orphans, ns, "its owner is gone")
	assert.Empty(t, mustList(t, ns))
}

func TestUpRefusesBadConfigBeforeCreatingAnything(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := Up(context.Background(), Config{Name: "tbad", Nodes: 10, PodsPerNode: 3000})
	require.ErrorContains(t, err, "exceeds the limit")
	assert.Empty(t, mustList(t, "kpb-tbad-"))
}

// TestBridgeMACsDoNotMove checks that the fabric's and a node's bridge keep their MAC
// address when ports join. A bridge whose MAC was never set takes its lowest port's and
// moves when a lower one joins; a pod that had learnt the old gateway MAC then lost every
// connection through the gateway (the ipvs basic-endpoints flake).
func TestBridgeMACsDoNotMove(t *testing.T) {
	l := newTestLab(t, Config{Nodes: 1, PodsPerNode: 0})
	node, ok := l.Host("node-0")
	require.True(t, ok)
	bridges := []struct{ nsPath, name string }{
		{l.fabric.NetNSPath, fabricBridge},
		{node.NetNSPath, podBridge},
	}
	macOf := func(nsPath, name string) string {
		h, err := openNS(nsPath)
		require.NoError(t, err)
		defer h.Close()
		link, err := h.LinkByName(name)
		require.NoError(t, err)
		return link.Attrs().HardwareAddr.String()
	}
	before := map[string]string{}
	for _, b := range bridges {
		before[b.name] = macOf(b.nsPath, b.name)
	}
	ctx := context.Background()
	for _, name := range []string{"mac-0", "mac-1", "mac-2", "mac-3"} {
		_, err := l.AddPod(ctx, PodSpec{Name: name, Node: "node-0", Ports: []Port{{Number: 80, Protocol: TCP}}})
		require.NoError(t, err)
	}
	require.NoError(t, l.AddClientRoute(ctx, netip.MustParsePrefix("10.96.0.0/16")))
	for _, b := range bridges {
		assert.Equal(t, before[b.name], macOf(b.nsPath, b.name), "%s's MAC moved when ports joined", b.name)
	}
}
