package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

// loopback is a ListenFunc for tests without root: every requested port gets an ephemeral
// loopback listener, and the test looks its address up by the requested port.
type loopback struct {
	mu    sync.Mutex
	addrs map[string]string // requested port → actual address
	fail  map[string]bool   // requested ports that fail to open
}

func newLoopback() *loopback { return &loopback{addrs: map[string]string{}, fail: map[string]bool{}} }

func (l *loopback) listen(_ context.Context, address string) (net.Listener, error) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[port] {
		return nil, errors.New("address already in use")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l.addrs[port] = ln.Addr().String()
	return ln, nil
}

func (l *loopback) addr(port int32) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs[strconv.Itoa(int(port))]
}

// get does GET http://addr/path and returns the status and body (status 0 when the
// connection failed).
func get(t *testing.T, addr, path string) (int, []byte) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func hcPort(name string, port int32, eps ...backends.Endpoint) *backends.ServicePort {
	return &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: "default", Name: name, Port: "http", Protocol: backends.TCP},
		ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 80, NodePort: 30080,
		ExternalPolicyLocal: true, HealthCheckNodePort: port, Endpoints: eps,
	}
}

func ep(ip string, local, ready, terminating bool) backends.Endpoint {
	return backends.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, IsLocal: local, Ready: ready, Serving: ready || terminating, Terminating: terminating}
}

func TestServiceHealthAnswers(t *testing.T) {
	tests := []struct {
		name       string
		sps        []*backends.ServicePort
		wantStatus int
		wantLocal  int
	}{
		{"one ready local endpoint", []*backends.ServicePort{hcPort("lb", 32000, ep("10.244.0.2", true, true, false))}, http.StatusOK, 1},
		{"remote endpoints only", []*backends.ServicePort{hcPort("lb", 32000, ep("10.244.1.2", false, true, false))}, http.StatusServiceUnavailable, 0},
		{"only a terminating local endpoint", []*backends.ServicePort{hcPort("lb", 32000, ep("10.244.0.2", true, false, true))}, http.StatusServiceUnavailable, 0},
		{"no endpoints", []*backends.ServicePort{hcPort("lb", 32000)}, http.StatusServiceUnavailable, 0},
		{"two ports, one pod counts once", []*backends.ServicePort{
			hcPort("lb", 32000, ep("10.244.0.2", true, true, false), ep("10.244.0.3", true, true, false)),
			func() *backends.ServicePort {
				sp := hcPort("lb", 32000, ep("10.244.0.2", true, true, false))
				sp.Name.Port = "https"
				return sp
			}(),
		}, http.StatusOK, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo := newLoopback()
			clock := &healthClock{now: time.Now, timeout: time.Minute}
			hs := newHealthServers("node-a", lo.listen, clock)
			t.Cleanup(func() { assert.NoError(t, hs.close()) })
			require.NoError(t, hs.sync(t.Context(), &backends.State{Services: tt.sps}))
			assert.Equal(t, []int32{32000}, hs.ports())
			status, body := get(t, lo.addr(32000), "/")
			assert.Equal(t, tt.wantStatus, status)
			var got ServiceHealth
			require.NoError(t, json.Unmarshal(body, &got), "%s", body)
			assert.Equal(t, "default", got.Service.Namespace)
			assert.Equal(t, "lb", got.Service.Name)
			assert.Equal(t, tt.wantLocal, got.LocalEndpoints)
			assert.True(t, got.ServiceProxyHealthy)
		})
	}
}

func TestServiceHealthFollowsSyncs(t *testing.T) {
	lo := newLoopback()
	clock := &healthClock{now: time.Now, timeout: time.Minute}
	hs := newHealthServers("node-a", lo.listen, clock)
	t.Cleanup(func() { assert.NoError(t, hs.close()) })
	ctx := t.Context()

	require.NoError(t, hs.sync(ctx, &backends.State{Services: []*backends.ServicePort{hcPort("a", 32000, ep("10.244.0.2", true, true, false)), hcPort("b", 32001)}}))
	addrA := lo.addr(32000)
	st, _ := get(t, addrA, "/")
	assert.Equal(t, http.StatusOK, st)
	st, _ = get(t, lo.addr(32001), "/")
	assert.Equal(t, http.StatusServiceUnavailable, st)

	// a's local endpoint goes: same listener, now 503; b goes: its port closes.
	require.NoError(t, hs.sync(ctx, &backends.State{Services: []*backends.ServicePort{hcPort("a", 32000)}}))
	assert.Equal(t, addrA, lo.addr(32000), "the listener is kept")
	st, _ = get(t, addrA, "/")
	assert.Equal(t, http.StatusServiceUnavailable, st)
	st, _ = get(t, lo.addr(32001), "/")
	assert.Zero(t, st, "b's health server must be closed")
	assert.Equal(t, []int32{32000}, hs.ports())

	// a port that cannot be opened is an error naming the service, retried next sync.
	lo.fail["32002"] = true
	err := hs.sync(ctx, &backends.State{Services: []*backends.ServicePort{hcPort("a", 32000), hcPort("c", 32002)}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "default/c")
	assert.Contains(t, err.Error(), "node-a")
	delete(lo.fail, "32002")
	require.NoError(t, hs.sync(ctx, &backends.State{Services: []*backends.ServicePort{hcPort("a", 32000), hcPort("c", 32002)}}))
	assert.Equal(t, []int32{32000, 32002}, hs.ports())
}

func TestProxierHealth(t *testing.T) {
	tests := []struct {
		name     string
		queued   *time.Duration // a change queued this long before the answer (nil: none)
		synced   bool
		wantCode int
	}{
		{"starting up", nil, false, http.StatusOK},
		{"synced, nothing pending", nil, true, http.StatusOK},
		{"change pending briefly", new(5 * time.Second), true, http.StatusOK},
		{"change pending beyond the timeout", new(61 * time.Second), true, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{now: t0}
			lo := newLoopback()
			clock := &healthClock{now: clk.Now, timeout: time.Minute}
			hs := newHealthServers("node-a", lo.listen, clock)
			t.Cleanup(func() { assert.NoError(t, hs.close()) })
			require.NoError(t, hs.startProxier(t.Context(), DefaultHealthzPort))
			if tt.synced {
				clock.updated(t0, false)
			}
			if tt.queued != nil {
				clock.queued()
				clk.Set(t0.Add(*tt.queued))
			}
			// a pending change also makes the service health servers unhealthy.
			require.NoError(t, hs.sync(t.Context(), &backends.State{Services: []*backends.ServicePort{hcPort("a", 32000, ep("10.244.0.2", true, true, false))}}))
			for _, path := range []string{"/healthz", "/livez"} {
				status, body := get(t, lo.addr(DefaultHealthzPort), path)
				assert.Equal(t, tt.wantCode, status, path)
				var got ProxierHealth
				require.NoError(t, json.Unmarshal(body, &got), "%s", body)
				if tt.synced {
					assert.True(t, got.LastUpdated.Equal(t0), path)
				}
				assert.Equal(t, path == "/healthz", got.NodeEligible != nil, path)
			}
			status, _ := get(t, lo.addr(32000), "/")
			assert.Equal(t, tt.wantCode, status, "service health follows the proxier's")
		})
	}
}

// lbService is a LoadBalancer Service with externalTrafficPolicy Local and a health-check
// node port.
func lbService(name, clusterIP string, hcPort int32) *corev1.Service {
	s := bt.ServiceObject(name, clusterIP, bt.TCPPort("http", 80))
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = hcPort
	s.Spec.Ports[0].NodePort = 30080
	return s
}

func TestAgentServesHealth(t *testing.T) {
	be := newFakeBackend()
	a := newAgent(be, time.Now, 0, time.Hour)
	lo := newLoopback()
	require.NoError(t, a.ServeHealth(t.Context(), lo.listen, 0))
	require.Error(t, a.ServeHealth(t.Context(), newLoopback().listen, 0), "a second ServeHealth is refused")
	t.Cleanup(func() { assert.NoError(t, a.CloseHealth()) })
	ctx := runAgent(t, a)

	local := bt.SliceObject("lb-1", "lb", "http", 8080, time.Time{}, "10.244.0.2")
	node := "node-a"
	local.Endpoints[0].NodeName = &node
	a.Observe(Change{Service: lbService("lb", "10.96.0.10", 32100), ResourceVersion: 1})
	a.Observe(Change{Slice: local, ResourceVersion: 2})
	require.NoError(t, a.WaitSynced(ctx, 2))
	require.NoError(t, a.HealthErr())
	assert.Equal(t, []int32{32100}, a.HealthCheckPorts())
	status, _ := get(t, lo.addr(32100), "/")
	assert.Equal(t, http.StatusOK, status)
	status, _ = get(t, lo.addr(DefaultHealthzPort), "/healthz")
	assert.Equal(t, http.StatusOK, status)

	remote := bt.SliceObject("lb-1", "lb", "http", 8080, time.Time{}, "10.244.1.2")
	other := "node-b"
	remote.Endpoints[0].NodeName = &other
	a.Observe(Change{Slice: remote, ResourceVersion: 3})
	require.NoError(t, a.WaitSynced(ctx, 3))
	status, _ = get(t, lo.addr(32100), "/")
	assert.Equal(t, http.StatusServiceUnavailable, status)

	a.Observe(Change{Service: lbService("lb", "10.96.0.10", 32100), Deleted: true, ResourceVersion: 4})
	require.NoError(t, a.WaitSynced(ctx, 4))
	assert.Empty(t, a.HealthCheckPorts())
	status, _ = get(t, lo.addr(32100), "/")
	assert.Zero(t, status, "the deleted service's health server is closed")
}
