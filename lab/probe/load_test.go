//go:build linux

package probe_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// TestLoadSpecRejected checks the specs Load refuses before touching any namespace (no
// root needed: the namespace path is never opened).
func TestLoadSpecRejected(t *testing.T) {
	ok := probe.Destination{Addr: netip.MustParseAddrPort("192.0.2.1:80"), Protocol: echo.TCP}
	tests := []struct {
		name string
		spec probe.LoadSpec
		want string
	}{
		{"udp", probe.LoadSpec{Destination: probe.Destination{Addr: ok.Addr, Protocol: echo.UDP}, Mode: probe.LoadConnections}, "only TCP"},
		{"no address", probe.LoadSpec{Destination: probe.Destination{Protocol: echo.TCP}, Mode: probe.LoadConnections}, "invalid target"},
		{"no mode", probe.LoadSpec{Destination: ok}, "mode"},
		{"too many workers", probe.LoadSpec{Destination: ok, Mode: probe.LoadRequests, Workers: probe.MaxLoadWorkers + 1}, "workers"},
		{"too long", probe.LoadSpec{Destination: ok, Mode: probe.LoadRequests, Duration: probe.MaxLoadDuration + time.Second}, "duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := probe.Load(context.Background(), "/nonexistent/netns", tt.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestLoadRefusesRootNamespace: a load from the host's namespace is refused before any
// socket exists.
func TestLoadRefusesRootNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	spec := probe.LoadSpec{Destination: probe.Destination{Addr: netip.MustParseAddrPort("192.0.2.1:80"), Protocol: echo.TCP},
		Mode: probe.LoadConnections, Workers: 2, Duration: 100 * time.Millisecond}
	_, err := probe.Load(context.Background(), "/proc/thread-self/ns/net", spec)
	require.ErrorIs(t, err, netns.ErrRootNamespace)
}

// TestLoad runs short loads from A to the echo server in B and checks the accounting.
func TestLoad(t *testing.T) {
	l := newLab(t)
	echoAddr := netip.AddrPortFrom(l.B.Addr, echoPort)
	tests := []struct {
		name      string
		spec      probe.LoadSpec
		wantOps   bool
		wantClass probe.ErrClass // when !wantOps: every failure is of this class
		maxOps    int            // when set: Ops+Errors may not exceed it
	}{
		{name: "connections", spec: probe.LoadSpec{Mode: probe.LoadConnections, Workers: 4, Duration: 300 * time.Millisecond}, wantOps: true},
		{name: "requests", spec: probe.LoadSpec{Mode: probe.LoadRequests, Workers: 4, Duration: 300 * time.Millisecond}, wantOps: true},
		{name: "bounded count", spec: probe.LoadSpec{Mode: probe.LoadConnections, Workers: 3, Duration: 5 * time.Second, MaxOps: 50}, wantOps: true, maxOps: 50},
		{name: "refused", spec: probe.LoadSpec{Mode: probe.LoadConnections, Workers: 2, Duration: 200 * time.Millisecond, MaxOps: 200,
			Destination: probe.Destination{Addr: netip.AddrPortFrom(l.B.Addr, closedPort), Protocol: echo.TCP}}, wantClass: probe.Refused, maxOps: 200},
		{name: "reset", spec: probe.LoadSpec{Mode: probe.LoadConnections, Workers: 2, Duration: 200 * time.Millisecond, MaxOps: 200,
			Destination: probe.Destination{Addr: netip.AddrPortFrom(l.B.Addr, resetPort), Protocol: echo.TCP}}, wantClass: probe.Reset, maxOps: 200},
		// The echo server answers a line longer than 4096 bytes with an error and closes:
		// every request fails, and the broken connection is made again (on the worker's
		// thread) for the next one.
		{name: "requests broken", spec: probe.LoadSpec{Mode: probe.LoadRequests, Workers: 2, Duration: 200 * time.Millisecond, MaxOps: 100,
			Payload: []byte(strings.Repeat("x", 5000))}, wantClass: probe.Other, maxOps: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			if !spec.Destination.Addr.IsValid() {
				spec.Destination = probe.Destination{Addr: echoAddr, Protocol: echo.TCP}
			}
			start := time.Now()
			res, err := probe.Load(context.Background(), l.A.Path, spec)
			require.NoError(t, err)
			assert.Less(t, time.Since(start), spec.Duration+3*time.Second, "the load overran its duration")
			assert.Equal(t, spec.Workers, res.Workers)
			assert.Len(t, res.PerWorker, spec.Workers)
			sum := 0
			for _, n := range res.Slices {
				sum += n
			}
			assert.Equal(t, res.Ops, sum, "slices must add up to the operations")
			if tt.maxOps > 0 {
				// plus, in keep-alive mode, a failed first connect per worker
				assert.LessOrEqual(t, res.Ops+res.Errors, tt.maxOps+spec.Workers)
			}
			if !tt.wantOps {
				assert.Zero(t, res.Ops)
				assert.Positive(t, res.Errors)
				assert.Equal(t, res.Errors, res.Classes[tt.wantClass], "classes %v, first error %v", res.Classes, res.FirstErr)
				if spec.Mode == probe.LoadRequests {
					assert.Greater(t, res.Errors, spec.Workers, "broken connections were not made again")
				}
				return
			}
			require.Zero(t, res.Errors, "first error: %v", res.FirstErr)
			require.Positive(t, res.Ops)
			assert.Equal(t, map[string]int{"web-1": res.Ops}, res.Pods)
			assert.Len(t, res.Latencies, res.Ops)
			assert.Positive(t, res.Percentile(50))
			assert.LessOrEqual(t, res.Percentile(50), res.Percentile(99))
			assert.InDelta(t, float64(res.Ops)/res.Elapsed.Seconds(), res.Rate(), 1e-6)
			perWorker := 0
			for _, n := range res.PerWorker {
				perWorker += n
			}
			assert.Equal(t, res.Ops, perWorker, "per-worker counts must add up to the operations")
			if tt.maxOps == 0 {
				// With a shared operation budget a worker that starts late can
				// legitimately find it spent, so only a time-bounded load
				// promises that every worker did something.
				for i, n := range res.PerWorker {
					assert.Positive(t, n, "worker %d did nothing", i)
				}
				assert.GreaterOrEqual(t, res.Elapsed, spec.Duration, "stopped early")
				assert.NotEmpty(t, res.SliceRates())
			}
		})
	}
}

// TestLoadRequestsNoServer: a keep-alive load cannot start when no worker can connect.
func TestLoadRequestsNoServer(t *testing.T) {
	l := newLab(t)
	spec := probe.LoadSpec{Destination: probe.Destination{Addr: netip.AddrPortFrom(l.B.Addr, closedPort), Protocol: echo.TCP},
		Mode: probe.LoadRequests, Workers: 2, Duration: 100 * time.Millisecond}
	_, err := probe.Load(context.Background(), l.A.Path, spec)
	require.Error(t, err)
	assert.Equal(t, probe.Refused, probe.Classify(err))
}

// TestLoadResultRates checks the derived rates without a lab.
func TestLoadResultRates(t *testing.T) {
	tests := []struct {
		name    string
		r       probe.LoadResult
		rate    float64
		slices  []float64
		p50, p0 time.Duration
	}{
		{"empty", probe.LoadResult{}, 0, nil, 0, 0},
		{"full slices", probe.LoadResult{Ops: 30, Elapsed: 300 * time.Millisecond, Slices: []int{10, 10, 10}, Slice: 100 * time.Millisecond,
			Latencies: []time.Duration{3, 1, 2}}, 100, []float64{100, 100, 100}, 2, 1},
		{"stub tail dropped", probe.LoadResult{Ops: 21, Elapsed: 210 * time.Millisecond, Slices: []int{10, 10, 1}, Slice: 100 * time.Millisecond},
			100, []float64{100, 100}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.rate, tt.r.Rate(), 1e-9)
			got := tt.r.SliceRates()
			require.Len(t, got, len(tt.slices))
			for i := range got {
				assert.InDelta(t, tt.slices[i], got[i], 1e-9)
			}
			assert.Equal(t, tt.p50, tt.r.Percentile(50))
			assert.Equal(t, tt.p0, tt.r.Percentile(1))
		})
	}
}
