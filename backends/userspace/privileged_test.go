//go:build linux

package userspace

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/lab/probe/probetest"
)

// The lab of the privileged tests: A of a probetest.Pair is the node (10.0.0.1, running the
// backend), B the pod (10.0.0.2) with two echo servers, web-1 on 8080 and web-2 on 8081 (TCP
// and UDP). Clients probe from the node (nat OUTPUT path) and from the pod (PREROUTING path:
// the pod routes the service range through the node).
const (
	port1, port2 = 8080, 8081
	deadPort     = 9 // nothing listens
)

var (
	serviceCIDR = netip.MustParsePrefix("10.96.0.0/12")
	vip         = netip.MustParseAddr("10.96.0.10")
)

type testLab struct {
	probetest.Pair
	node, pod *probe.Prober
	b         *Backend
}

func newTestLab(t testing.TB) *testLab {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-nft", "iptables-nft-restore", "iptables-nft-save")
	pair := probetest.NewPair(t)
	routeVia(t, pair.A, netip.Addr{}) // node: the service range on its veth
	routeVia(t, pair.B, pair.A.Addr)  // pod: the service range through the node
	for i, p := range []int32{port1, port2} {
		srv, err := echo.Serve(pair.B.Path, echo.Identity{Pod: []string{"web-1", "web-2"}[i], PodIP: pair.B.Addr.String(), Node: "node-b"},
			[]echo.Port{{Number: p, Protocol: echo.TCP}, {Number: p, Protocol: echo.UDP}})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	}
	l := &testLab{Pair: pair}
	var err error
	l.node, err = probe.New(pair.A.Path, probe.WithWorkers(1))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.node.Close()) })
	l.pod, err = probe.New(pair.B.Path, probe.WithWorkers(1))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.pod.Close()) })
	l.b, err = New(Options{NodeName: "node-a", NetNSPath: pair.A.Path, UDPIdleTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.b.Cleanup(context.Background())) })
	return l
}

// routeVia adds a route for the service range in h's namespace, through gw (or onto h's link
// when gw is invalid).
//
// Equivalent to: `ip -n $h route add 10.96.0.0/12 [via $gw] dev $link`.
func routeVia(t testing.TB, h probetest.Host, gw netip.Addr) {
	t.Helper()
	ns, err := vnetns.GetFromPath(h.Path)
	require.NoError(t, err)
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns)
	require.NoError(t, err)
	defer nl.Close()
	link, err := nl.LinkByName(h.Link)
	require.NoError(t, err)
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: &net.IPNet{IP: serviceCIDR.Addr().AsSlice(), Mask: net.CIDRMask(serviceCIDR.Bits(), 32)}}
	if gw.IsValid() {
		r.Gw = gw.AsSlice()
	}
	require.NoError(t, nl.RouteAdd(r))
}

// service returns a service port on vip with ready endpoints on the pod at ports.
func (l *testLab) service(name string, proto backends.Protocol, port int32, epPorts ...int32) *backends.ServicePort {
	sp := &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: "default", Name: name, Port: "p", Protocol: proto},
		ClusterIP: vip,
		Port:      port,
	}
	for _, p := range epPorts {
		sp.Endpoints = append(sp.Endpoints, backends.Endpoint{IP: l.B.Addr, Port: p, Ready: true, Serving: true})
	}
	return sp
}

// sync syncs the node with the given service ports.
func (l *testLab) sync(t testing.TB, sps ...*backends.ServicePort) backends.SyncResult {
	t.Helper()
	st := &backends.State{NodeName: "node-a", NodeIPs: []netip.Addr{l.A.Addr}, Services: sps}
	st.SortServices()
	res, err := l.b.Sync(context.Background(), st)
	require.NoError(t, err)
	return res
}

func target(port uint16, proto backends.Protocol) probe.Destination {
	return probe.Destination{Addr: netip.AddrPortFrom(vip, port), Protocol: echo.Protocol(proto)}
}

// pods returns the pods that answered n requests of p to tgt, in order.
func pods(t testing.TB, p *probe.Prober, tgt probe.Destination, n int) []string {
	t.Helper()
	var out []string
	for range n {
		res := p.Request(context.Background(), tgt, probe.Options{})
		require.NoError(t, res.Err, "probe %s", tgt)
		out = append(out, res.Answer.Pod)
	}
	return out
}

func TestClusterIPReachesEndpoint(t *testing.T) {
	l := newTestLab(t)
	res := l.sync(t, l.service("tcp", backends.TCP, 80, port1), l.service("udp", backends.UDP, 53, port1))
	assert.True(t, res.Full)
	assert.Equal(t, 4, res.Rules) // CONTAINER and HOST portal per service port
	assert.Equal(t, 2, res.ChangedServices)
	for _, tc := range []struct {
		name  string
		from  *probe.Prober
		proto backends.Protocol
		port  uint16
	}{
		{"tcp from node", l.node, backends.TCP, 80},
		{"udp from node", l.node, backends.UDP, 53},
		{"tcp from pod", l.pod, backends.TCP, 80},
		{"udp from pod", l.pod, backends.UDP, 53},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.from.Request(context.Background(), target(tc.port, tc.proto), probe.Options{})
			require.NoError(t, r.Err)
			assert.Equal(t, "web-1", r.Answer.Pod)
			// The known limitation: the endpoint sees the node, never the real client.
			assert.Equal(t, l.A.Addr, r.Answer.Client.Addr(), "source IP is the node's")
		})
	}
	// Nothing changed: no rule is rewritten.
	res = l.sync(t, l.service("tcp", backends.TCP, 80, port1), l.service("udp", backends.UDP, 53, port1))
	assert.False(t, res.Full)
	assert.Zero(t, res.Rules)
	assert.Zero(t, res.ChangedServices)
}

func TestRoundRobinAndDeadEndpoints(t *testing.T) {
	l := newTestLab(t)
	tests := []struct {
		name  string
		proto backends.Protocol
		eps   []int32
		want  []string
	}{
		{"tcp alternates", backends.TCP, []int32{port1, port2}, []string{"web-1", "web-2", "web-1", "web-2", "web-1", "web-2"}},
		{"udp sessions alternate", backends.UDP, []int32{port1, port2}, []string{"web-1", "web-2", "web-1", "web-2"}},
		{"dead endpoint skipped by the retry", backends.TCP, []int32{deadPort, port1}, []string{"web-1", "web-1", "web-1", "web-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l.sync(t, l.service("rr", tc.proto, 80, tc.eps...))
			assert.Equal(t, tc.want, pods(t, l.node, target(80, tc.proto), len(tc.want)))
		})
	}
}

func TestEndpointChangeInPlace(t *testing.T) {
	l := newTestLab(t)
	l.sync(t, l.service("web", backends.TCP, 80, port1))
	port, ok := l.b.ProxyPort(backends.ServicePortName{Namespace: "default", Name: "web", Port: "p", Protocol: backends.TCP})
	require.True(t, ok)
	res := l.sync(t, l.service("web", backends.TCP, 80, port2))
	assert.Equal(t, 1, res.ChangedServices)
	assert.Zero(t, res.Rules, "an endpoint change rewrites no rule")
	again, _ := l.b.ProxyPort(backends.ServicePortName{Namespace: "default", Name: "web", Port: "p", Protocol: backends.TCP})
	assert.Equal(t, port, again, "the listener stays")
	assert.Equal(t, []string{"web-2", "web-2"}, pods(t, l.node, target(80, backends.TCP), 2))
}

// TestUDPSessionFollowsEndpointChange: a UDP client that keeps sending from one source
// port keeps its session alive; when its endpoint leaves the service, the session must end
// so that the next datagram reaches a current endpoint (conformance case
// udp-server-cycles).
func TestUDPSessionFollowsEndpointChange(t *testing.T) {
	l := newTestLab(t)
	l.sync(t, l.service("dns", backends.UDP, 53, port1))
	opts := probe.Options{SourcePort: 40053}
	ask := func() string {
		t.Helper()
		r := l.pod.Request(context.Background(), target(53, backends.UDP), opts)
		require.NoError(t, r.Err)
		return r.Answer.Pod
	}
	assert.Equal(t, "web-1", ask())
	assert.Equal(t, "web-1", ask(), "one session per client address")
	l.sync(t, l.service("dns", backends.UDP, 53, port2))
	assert.Equal(t, "web-2", ask(), "the session on the removed endpoint was kept")
	assert.Equal(t, "web-2", ask())
}

func TestAffinity(t *testing.T) {
	l := newTestLab(t)
	sp := l.service("sticky", backends.TCP, 80, port1, port2)
	sp.AffinityClientIP, sp.AffinityTimeoutSeconds = true, 60
	l.sync(t, sp)
	got := pods(t, l.node, target(80, backends.TCP), 15)
	for _, p := range got[1:] {
		assert.Equal(t, got[0], p, "15 answers from one pod: %v", got)
	}
	// Switching affinity off spreads again.
	sp2 := l.service("sticky", backends.TCP, 80, port1, port2)
	l.sync(t, sp2)
	assert.ElementsMatch(t, []string{"web-1", "web-2"}, pods(t, l.node, target(80, backends.TCP), 2))
}

func TestNoEndpointsRefused(t *testing.T) {
	l := newTestLab(t)
	// The node forwards, as every node does, so a pod's packets for a VIP reach FORWARD.
	require.NoError(t, netns.Do(l.A.Path, func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return err
		}
		// The lab routes the pod's VIP traffic back out of the interface it came in on; an
		// ICMP redirect would then use up the pod's ICMP rate-limit token before the reject.
		for _, dev := range []string{"all", l.A.Link} {
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/send_redirects", []byte("0"), 0o644); err != nil {
				return err
			}
		}
		return nil
	}))
	l.sync(t, l.service("empty", backends.TCP, 80), l.service("empty", backends.UDP, 80))
	tests := []struct {
		name  string
		from  *probe.Prober
		proto backends.Protocol
		want  func(t *testing.T, r probe.Result)
	}{
		{"tcp from node", l.node, backends.TCP, refused},
		{"tcp from pod", l.pod, backends.TCP, refused},
		{"udp from pod", l.pod, backends.UDP, refused},
		// REJECT in OUTPUT fails the local sender's send() with EPERM (kube-proxy's
		// iptables mode does the same for the node's own UDP).
		{"udp from node", l.node, backends.UDP, func(t *testing.T, r probe.Result) {
			assert.ErrorIs(t, r.Err, syscall.EPERM)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := tc.from.Request(context.Background(), target(80, tc.proto), probe.Options{Timeout: 3 * time.Second})
			tc.want(t, r)
			assert.Less(t, time.Since(start), time.Second, "at once, not a timeout")
		})
	}
	// An endpoint appears: the reject goes, the redirect comes.
	l.sync(t, l.service("empty", backends.TCP, 80, port1))
	assert.Equal(t, []string{"web-1"}, pods(t, l.node, target(80, backends.TCP), 1))
	assert.Equal(t, []string{"web-1"}, pods(t, l.pod, target(80, backends.TCP), 1))
}

func refused(t *testing.T, r probe.Result) {
	t.Helper()
	assert.Equal(t, probe.Refused, r.Class, "%v", r.Err)
}

func TestRemoveServiceClosesListenerAndConnections(t *testing.T) {
	l := newTestLab(t)
	name := backends.ServicePortName{Namespace: "default", Name: "gone", Port: "p", Protocol: backends.TCP}
	l.sync(t, l.service("gone", backends.TCP, 80, port1))
	port, ok := l.b.ProxyPort(name)
	require.True(t, ok)
	ctx := context.Background()
	c, err := l.node.Dial(ctx, target(80, backends.TCP), probe.Options{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Request(ctx).Err)

	res := l.sync(t)
	assert.Equal(t, 1, res.ChangedServices)
	_, ok = l.b.ProxyPort(name)
	assert.False(t, ok)
	assert.NotEqual(t, probe.OK, c.Request(ctx).Class, "the open connection was closed")
	direct := probe.Destination{Addr: netip.AddrPortFrom(l.A.Addr, port), Protocol: echo.TCP}
	assert.Equal(t, probe.Refused, l.node.Request(ctx, direct, probe.Options{}).Class, "the listener is closed")
	assert.NotEqual(t, probe.OK, l.node.Request(ctx, target(80, backends.TCP), probe.Options{Timeout: 500 * time.Millisecond}).Class)
}

// savedRules returns iptables-nft-save of the node namespace.
func savedRules(t testing.TB, nsPath string) string {
	t.Helper()
	out, err := netns.Exec(context.Background(), nsPath, netns.Command{Path: "iptables-nft-save"})
	require.NoError(t, err)
	return string(out.Stdout)
}

func TestCleanupRemovesEverything(t *testing.T) {
	l := newTestLab(t)
	ctx := context.Background()
	before := runtime.NumGoroutine()
	tcp, udp := l.service("web", backends.TCP, 80, port1, port2), l.service("web", backends.UDP, 53, port1)
	tcp.NodePort = 30080
	l.sync(t, tcp, udp, l.service("empty", backends.TCP, 81))
	saved := savedRules(t, l.A.Path)
	for _, j := range Jumps() {
		assert.Contains(t, saved, "-A "+j.From+" -j "+j.To)
	}
	// Leave traffic in flight: an open TCP connection and a UDP session.
	c, err := l.node.Dial(ctx, target(80, backends.TCP), probe.Options{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Request(ctx).Err)
	require.NoError(t, l.node.Request(ctx, target(53, backends.UDP), probe.Options{}).Err)
	require.NoError(t, l.node.Request(ctx, probe.Destination{Addr: netip.AddrPortFrom(l.A.Addr, 30080), Protocol: echo.TCP}, probe.Options{}).Err, "node port")

	require.NoError(t, l.b.Cleanup(ctx))
	assert.NotContains(t, savedRules(t, l.A.Path), "KUBE-")
	requireGoroutinesBack(t, before)
	// Cleanup is idempotent, and a new Sync starts over.
	require.NoError(t, l.b.Cleanup(ctx))
	assert.True(t, l.sync(t, tcp).Full)
	assert.Equal(t, []string{"web-1"}, pods(t, l.node, target(80, backends.TCP), 1))
}

// requireGoroutinesBack waits (polling, without extra goroutines that would count
// themselves) until no more goroutines run than before, and fails with a dump otherwise.
func requireGoroutinesBack(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutine leak: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}
