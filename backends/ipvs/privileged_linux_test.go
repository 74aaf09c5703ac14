//go:build linux

package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	mipvs "github.com/moby/ipvs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// RequireIPVSEnv turns "skip: kernel has no IPVS" into a failure; the VM run of `make test`
// sets it.
const requireIPVSEnv = "KPBENCH_REQUIRE_IPVS"

// requireIPVS skips the test (fails it with KPBENCH_REQUIRE_IPVS=1) unless the kernel has
// the IPVS generic-netlink family, probed in a throwaway namespace.
func requireIPVS(t testing.TB) {
	t.Helper()
	testutil.RequireRoot(t)
	_, path := testutil.NewNetNS(t)
	err := Probe(path)
	if errors.Is(err, ErrNoIPVS) {
		if os.Getenv(requireIPVSEnv) == "1" {
			t.Fatalf("kernel has no IPVS (and %s=1 forbids skipping)", requireIPVSEnv)
		}
		t.Skip("kernel has no IPVS (run it with `kpbench vm run`, or make test-vm)")
	}
	require.NoError(t, err)
}

// kernelBackend returns a Backend on a throwaway namespace with IPVS.
func kernelBackend(t testing.TB, opts Options) (*Backend, string) {
	t.Helper()
	requireIPVS(t)
	testutil.RequireBinary(t, "ipset", "iptables-nft-restore", "iptables-nft-save")
	_, path := testutil.NewNetNS(t)
	opts.NodeName, opts.NetNSPath = "node-1", path
	b, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b, path
}

// kernelModel reads the namespace's IPVS table with an independent moby/ipvs handle, in the
// format of flat.
func kernelModel(t testing.TB, path string) []string {
	t.Helper()
	h, err := mipvs.New(path)
	require.NoError(t, err)
	defer h.Close()
	svcs, err := h.GetServices()
	require.NoError(t, err)
	m := NewModel()
	for _, s := range svcs {
		k, ok := keyOf(s)
		require.True(t, ok, "unexpected virtual server %+v", s)
		require.NotZero(t, s.Flags&FlagHashed, "kernel marks every virtual server hashed")
		vs := &VirtualServer{Key: k, Scheduler: s.SchedName, Flags: s.Flags &^ FlagHashed, Timeout: s.Timeout, Dests: map[netip.AddrPort]int{}}
		ds, err := h.GetDestinations(s)
		require.NoError(t, err)
		for _, d := range ds {
			assert.Equal(t, uint32(mipvs.ConnectionFlagMasq), d.ConnectionFlags&mipvs.ConnectionFlagFwdMask, "real servers are in masquerade mode")
			a, _ := netip.AddrFromSlice(d.Address.To4())
			vs.Dests[netip.AddrPortFrom(a, d.Port)] = d.Weight
		}
		m.Services[k] = vs
	}
	return flat(m)
}

// dummyAddrs returns the addresses on kube-ipvs0 (nil when it does not exist).
func dummyAddrs(t testing.TB, path string) []string {
	t.Helper()
	ns, err := vnetns.GetFromPath(path)
	require.NoError(t, err)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	require.NoError(t, err)
	defer h.Close()
	link, err := h.LinkByName(DummyDevice)
	if err != nil {
		return nil
	}
	addrs, err := h.AddrList(link, netlink.FAMILY_V4)
	require.NoError(t, err)
	out := []string{}
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	return out
}

func run(t testing.TB, path, prog string, args ...string) string {
	t.Helper()
	res, err := netns.Exec(context.Background(), path, netns.Command{Path: prog, Args: args})
	require.NoError(t, err)
	return string(res.Stdout)
}

// kernelState is a small node: a plain service with two endpoints, a NodePort with
// affinity, one without endpoints, one with a terminating endpoint.
func kernelState() *backends.State {
	return state(
		bt.Service("ns/plain:p", "172.30.0.1:80", bt.EP("10.1.0.1:8080", bt.Local), bt.EP("10.1.0.2:8080")),
		bt.With(bt.Service("ns/np:p", "172.30.0.2:80", bt.EP("10.1.0.3:8080", bt.Local)), func(sp *backends.ServicePort) {
			sp.NodePort, sp.AffinityClientIP, sp.AffinityTimeoutSeconds = 30080, true, 60
		}),
		bt.Service("ns/empty:p/udp", "172.30.0.3:53"),
		bt.Service("ns/term:p", "172.30.0.4:80", bt.EP("10.1.0.4:8080"), bt.EP("10.1.0.5:8080", bt.Terminating)),
	)
}

func TestKernelFullSync(t *testing.T) {
	b, path := kernelBackend(t, Options{Scheduler: "wrr"})
	ctx := context.Background()
	st := kernelState()

	res, err := b.Sync(ctx, st)
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Equal(t, 4, res.ChangedServices)
	assert.Equal(t, 6+7, res.Rules, "6 virtual servers, 7 real servers")
	assert.Positive(t, res.Bytes)
	assert.Positive(t, res.Apply)

	want := []string{
		"TCP/172.30.0.1:80 wrr 10.1.0.1:8080=1 10.1.0.2:8080=1",
		"TCP/172.30.0.2:80 wrr persistent 60 10.1.0.3:8080=1",
		"UDP/172.30.0.3:53 wrr",
		"TCP/172.30.0.4:80 wrr 10.1.0.4:8080=1 10.1.0.5:8080=0",
		"TCP/192.168.0.1:30080 wrr persistent 60 10.1.0.3:8080=1",
		"TCP/192.168.1.1:30080 wrr persistent 60 10.1.0.3:8080=1",
	}
	assert.Equal(t, want, kernelModel(t, path))
	assert.ElementsMatch(t, []string{"172.30.0.1/32", "172.30.0.2/32", "172.30.0.3/32", "172.30.0.4/32"}, dummyAddrs(t, path))

	if _, err := exec.LookPath("ipvsadm"); err == nil {
		out := run(t, path, "ipvsadm", "-Ln")
		assert.Contains(t, out, "TCP  172.30.0.2:80 wrr persistent 60")
		assert.Regexp(t, `-> 10\.1\.0\.5:8080\s+Masq\s+0`, out)
		assert.Contains(t, out, "UDP  172.30.0.3:53 wrr")
	}
	sets := run(t, path, "ipset", "list", SetClusterIP)
	assert.Contains(t, sets, "172.30.0.3,udp:53")
	assert.Contains(t, run(t, path, "ipset", "list", SetNodePortTCP), "30080")
	for _, sysctl := range []string{"vs/conntrack", "vs/expire_nodest_conn", "vs/expire_quiescent_template", "ip_forward"} {
		var v []byte
		require.NoError(t, netns.Do(path, func() error {
			var err error
			v, err = os.ReadFile("/proc/sys/net/ipv4/" + sysctl)
			return err
		}))
		assert.Equal(t, "1", strings.TrimSpace(string(v)), sysctl)
	}

	// Idempotence: the same state again is partial and changes nothing; a forced full sync
	// does not duplicate the jumps.
	res, err = b.Sync(ctx, st)
	require.NoError(t, err)
	assert.False(t, res.Full)
	assert.Zero(t, res.ChangedServices)
	assert.Zero(t, res.Bytes, "no ipset or iptables input when nothing changed")
	b.ForceFullSync()
	res, err = b.Sync(ctx, st)
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Zero(t, res.ChangedServices)
	assert.Equal(t, want, kernelModel(t, path))
	nat := run(t, path, "iptables-nft-save", "-t", "nat")
	assert.Equal(t, 1, strings.Count(nat, "-A PREROUTING -j KUBE-SERVICES\n"), nat)
	assert.Contains(t, nat, "--match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ")
	filter := run(t, path, "iptables-nft-save", "-t", "filter")
	assert.Equal(t, 1, strings.Count(filter, "-A INPUT -j KUBE-IPVS-FILTER\n"), filter)
}

func TestKernelPartialSyncChangesOneService(t *testing.T) {
	b, path := kernelBackend(t, Options{})
	ctx := context.Background()
	st := kernelState()
	_, err := b.Sync(ctx, st)
	require.NoError(t, err)
	before := kernelModel(t, path)

	// Endpoint 10.1.0.2 of "plain" starts terminating, and a new endpoint appears.
	st = kernelState()
	st.Services[2].Endpoints = []backends.Endpoint{bt.EP("10.1.0.1:8080", bt.Local), bt.EP("10.1.0.2:8080", bt.Terminating), bt.EP("10.1.0.9:8080")}
	require.Equal(t, "plain", st.Services[2].Name.Name)
	res, err := b.Sync(ctx, st)
	require.NoError(t, err)
	assert.False(t, res.Full)
	assert.Equal(t, 1, res.ChangedServices)
	after := kernelModel(t, path)
	want := append([]string{"TCP/172.30.0.1:80 rr 10.1.0.1:8080=1 10.1.0.2:8080=0 10.1.0.9:8080=1"}, before[1:]...)
	assert.Equal(t, want, after)

	// Affinity switched off on "np": its three virtual servers are updated in place.
	st.Services[1].AffinityClientIP = false
	res, err = b.Sync(ctx, st)
	require.NoError(t, err)
	assert.Equal(t, 1, res.ChangedServices)
	assert.NotContains(t, strings.Join(kernelModel(t, path), "\n"), "persistent")
}

func TestKernelStaleRemoval(t *testing.T) {
	b, path := kernelBackend(t, Options{})
	ctx := context.Background()
	st := kernelState()
	_, err := b.Sync(ctx, st)
	require.NoError(t, err)

	// Someone else's leftovers: a virtual server, a real server and an address.
	h, err := mipvs.New(path)
	require.NoError(t, err)
	defer h.Close()
	stale := service(key(backends.TCP, "172.30.9.9:99"), &VirtualServer{Scheduler: "rr"})
	require.NoError(t, h.NewService(stale))
	plain := service(key(backends.TCP, "172.30.0.1:80"), &VirtualServer{Scheduler: "rr"})
	require.NoError(t, h.NewDestination(plain, destination(DestChange{Dest: ap("10.9.9.9:80"), Weight: 1})))
	run(t, path, "ip", "addr", "add", "172.30.9.9/32", "dev", DummyDevice)

	// A service removed from the state goes with a partial sync; the leftover real server
	// of an unchanged service is found by the next full sync.
	st.Services = st.Services[1:] // drops "empty"
	res, err := b.Sync(ctx, st)
	require.NoError(t, err)
	assert.False(t, res.Full)
	assert.Equal(t, 1, res.ChangedServices)
	got := strings.Join(kernelModel(t, path), "\n")
	assert.NotContains(t, got, "172.30.0.3")
	assert.NotContains(t, got, "172.30.9.9")
	assert.NotContains(t, dummyAddrs(t, path), "172.30.9.9/32")
	assert.NotContains(t, dummyAddrs(t, path), "172.30.0.3/32")

	b.ForceFullSync()
	_, err = b.Sync(ctx, st)
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(kernelModel(t, path), "\n"), "10.9.9.9")
	assert.Equal(t, flat(Build(st, "rr")), kernelModel(t, path))
}

func TestKernelCleanupLeavesNothing(t *testing.T) {
	b, path := kernelBackend(t, Options{StrictARP: true})
	ctx := context.Background()
	_, err := b.Sync(ctx, kernelState())
	require.NoError(t, err)
	require.NoError(t, b.Cleanup(ctx))

	assert.Empty(t, kernelModel(t, path))
	assert.Nil(t, dummyAddrs(t, path), "kube-ipvs0 is gone")
	for _, table := range []string{"nat", "filter"} {
		assert.NotContains(t, run(t, path, "iptables-nft-save", "-t", table), "KUBE-")
	}
	assert.Empty(t, strings.TrimSpace(run(t, path, "ipset", "list", "-n")))
	require.NoError(t, b.Cleanup(ctx), "cleanup of a clean node succeeds")

	// And the node can be synced again.
	res, err := b.Sync(ctx, kernelState())
	require.NoError(t, err)
	assert.True(t, res.Full)
}

// TestKernelUDPConntrackCleanup checks that a sync deletes the UDP conntrack entries of a
// removed real server, and only those.
func TestKernelUDPConntrackCleanup(t *testing.T) {
	b, path := kernelBackend(t, Options{})
	testutil.RequireBinary(t, "conntrack")
	ctx := context.Background()
	st := state(bt.Service("ns/dns:p/udp", "172.30.0.10:53", bt.EP("10.1.0.1:53"), bt.EP("10.1.0.2:53")))
	_, err := b.Sync(ctx, st)
	require.NoError(t, err)
	for i, rs := range []string{"10.1.0.1", "10.1.0.2"} {
		sport := fmt.Sprint(40000 + i)
		run(t, path, "conntrack", "-I", "-p", "udp", "-s", "10.9.0.1", "-d", "172.30.0.10", "--sport", sport, "--dport", "53",
			"--reply-src", rs, "--reply-dst", "10.9.0.1", "--reply-port-src", "53", "--reply-port-dst", sport, "-t", "120")
	}
	listed := func() string {
		res, err := netns.Exec(ctx, path, netns.Command{Path: "conntrack", Args: []string{"-L", "-p", "udp"}})
		require.NoError(t, err)
		return string(res.Stdout)
	}
	require.Contains(t, listed(), "src=10.1.0.2")

	st.Services[0].Endpoints = st.Services[0].Endpoints[:1]
	_, err = b.Sync(ctx, st)
	require.NoError(t, err)
	out := listed()
	assert.NotContains(t, out, "src=10.1.0.2", "the removed real server's entry is gone")
	assert.Contains(t, out, "src=10.1.0.1", "the remaining real server's entry stays")
}

// TestKernelSchedulers checks that the kernel takes every scheduler New accepts, and that
// switching the scheduler of a node updates its virtual servers in place.
func TestKernelSchedulers(t *testing.T) {
	requireIPVS(t)
	testutil.RequireBinary(t, "ipset", "iptables-nft-restore", "iptables-nft-save")
	_, path := testutil.NewNetNS(t)
	ctx := context.Background()
	st := state(bt.Service("ns/a:p", "172.30.0.1:80", bt.EP("10.1.0.1:80"), bt.EP("10.1.0.2:80")))
	for _, sched := range Schedulers() {
		t.Run(sched, func(t *testing.T) {
			b, err := New(Options{NodeName: "node-1", NetNSPath: path, Scheduler: sched})
			require.NoError(t, err)
			defer b.Close()
			_, err = b.Sync(ctx, st)
			require.NoError(t, err)
			assert.Equal(t, []string{"TCP/172.30.0.1:80 " + sched + " 10.1.0.1:80=1 10.1.0.2:80=1"}, kernelModel(t, path))
		})
	}
}

// TestKernelTraffic checks the data path from the node itself: a service with an endpoint
// answers through IPVS, one without endpoints refuses at once (IPVS answers ICMP port
// unreachable), as the e2e test "should be rejected when no endpoints exist" expects.
func TestKernelTraffic(t *testing.T) {
	b, node := kernelBackend(t, Options{})
	_, pod := testutil.NewNetNS(t)
	ctx := context.Background()

	// node 10.1.0.254/24 <-veth-> pod 10.1.0.1/24
	nodeNS, err := vnetns.GetFromPath(node)
	require.NoError(t, err)
	defer nodeNS.Close()
	podNS, err := vnetns.GetFromPath(pod)
	require.NoError(t, err)
	defer podNS.Close()
	nh, err := netlink.NewHandleAt(nodeNS, unix.NETLINK_ROUTE)
	require.NoError(t, err)
	defer nh.Close()
	peer := fmt.Sprintf("kpbp%d", os.Getpid()%100000)
	require.NoError(t, nh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "kpbn0"}, PeerName: peer, PeerNamespace: netlink.NsFd(podNS)}))
	run(t, node, "ip", "addr", "add", "10.1.0.254/24", "dev", "kpbn0")
	run(t, node, "ip", "link", "set", "kpbn0", "up")
	run(t, pod, "ip", "addr", "add", "10.1.0.1/24", "dev", peer)
	run(t, pod, "ip", "link", "set", peer, "up")
	run(t, pod, "ip", "route", "add", "default", "via", "10.1.0.254")

	bt.Serve(t, pod, "10.1.0.1:8080", "pod-1\n")

	st := state(
		bt.Service("ns/up:p", "172.30.0.1:80", bt.EP("10.1.0.1:8080")),
		bt.Service("ns/none:p", "172.30.0.2:80"),
	)
	_, err = b.Sync(ctx, st)
	require.NoError(t, err)

	dial := func(addr string) (string, error) { return bt.Dial(node, addr) }
	answer, err := dial("172.30.0.1:80")
	require.NoError(t, err)
	assert.Equal(t, "pod-1\n", answer)

	start := time.Now()
	_, err = dial("172.30.0.2:80")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "no endpoints: refused, not a timeout")
	assert.Less(t, time.Since(start), 3*time.Second)

	_, err = dial("172.30.0.1:81")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "a VIP on a port that is no service: rejected")
}

// TestProbeRefusesWithoutIPVS runs on kernels without IPVS (the host): New must refuse with
// the exact text callers turn into a skip.
func TestProbeRefusesWithoutIPVS(t *testing.T) {
	testutil.RequireRoot(t)
	_, path := testutil.NewNetNS(t)
	if Probe(path) == nil {
		t.Skip("this kernel has IPVS; the refusal is tested on a kernel without it")
	}
	_, err := New(Options{NodeName: "node-1", NetNSPath: path})
	require.Error(t, err)
	assert.Equal(t, "kernel has no IPVS (run it with `kpbench vm run`)", err.Error())
	assert.ErrorIs(t, err, ErrNoIPVS)
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown scheduler", Options{NodeName: "n", Scheduler: "fastest"}, `unknown scheduler "fastest"`},
		{"upper-case scheduler", Options{NodeName: "n", Scheduler: "RR"}, `unknown scheduler "RR"`},
		{"masquerade bit", Options{NodeName: "n", MasqueradeBit: 40}, "masquerade bit 40"},
		{"missing namespace", Options{NodeName: "n", NetNSPath: "/run/netns/kpb-does-not-exist"}, "open netns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
