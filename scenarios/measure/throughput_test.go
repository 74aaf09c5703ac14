//go:build linux

package measure

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/lab/probe/probetest"
	"kpbench.dev/kpbench/reports"
)

func TestParseCPUTimes(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    CPUTimes
		wantErr string
	}{
		{name: "kernel 6", stat: "cpu  100 50 200 1000 10 5 30 2 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n",
			want: CPUTimes{User: 1.5, System: 2, Idle: 10.1, IRQ: 0.05, SoftIRQ: 0.3, Steal: 0.02}},
		{name: "no cpu line", stat: "intr 1 2 3\n", wantErr: "/proc/stat:1"},
		{name: "short", stat: "cpu 1 2 3\n", wantErr: "/proc/stat:1"},
		{name: "not a number", stat: "cpu 1 2 x 4 5 6 7 8\n", wantErr: "field 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCPUTimes(tt.stat)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tt.want.User, got.User, 1e-9)
			assert.InDelta(t, tt.want.System, got.System, 1e-9)
			assert.InDelta(t, tt.want.Idle, got.Idle, 1e-9)
			assert.InDelta(t, tt.want.IRQ, got.IRQ, 1e-9)
			assert.InDelta(t, tt.want.SoftIRQ, got.SoftIRQ, 1e-9)
			assert.InDelta(t, tt.want.Steal, got.Steal, 1e-9)
			assert.InDelta(t, 1.5+2+0.05+0.3+0.02, got.Busy(), 1e-9)
		})
	}
}

func TestStride(t *testing.T) {
	ds := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i) * time.Second
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		n    int
		want []float64
	}{
		{"empty", nil, 3, nil},
		{"fewer than n", ds(2), 3, []float64{0, 1}},
		{"every other", ds(6), 3, []float64{0, 2, 4}},
		{"uneven", ds(7), 3, []float64{0, 3, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, stride(tt.in, tt.n))
		})
	}
}

// TestThroughput loads an echo server from two sources at once (both in namespace A of a
// probetest pair) and checks the measurements' shape.
func TestThroughput(t *testing.T) {
	pair := probetest.NewPair(t)
	srv, err := echo.Serve(pair.B.Path, echo.Identity{Pod: "web-1", PodIP: pair.B.Addr.String(), Node: "node-b"},
		[]echo.Port{{Number: 8080, Protocol: echo.TCP}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	target := probe.Destination{Addr: netip.AddrPortFrom(pair.B.Addr, 8080), Protocol: echo.TCP}
	sources := []ThroughputSource{{Host: "a1", NSPath: pair.A.Path, Destination: target}, {Host: "a2", NSPath: pair.A.Path, Destination: target}}
	dead := []ThroughputSource{{Host: "a1", NSPath: pair.A.Path, Destination: probe.Destination{Addr: netip.AddrPortFrom(pair.B.Addr, 9), Protocol: echo.TCP}}}
	tests := []struct {
		name    string
		sources []ThroughputSource
		mode    probe.LoadMode
		wantErr string
	}{
		{name: "connections", sources: sources, mode: probe.LoadConnections},
		{name: "requests", sources: sources, mode: probe.LoadRequests},
		{name: "refused", sources: dead, mode: probe.LoadConnections, wantErr: "no operation succeeded"},
		{name: "no source", mode: probe.LoadConnections, wantErr: "no source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := Throughput(context.Background(), tt.sources, ThroughputOptions{Mode: tt.mode, Workers: 2,
				Duration: 300 * time.Millisecond, Baseline: 100 * time.Millisecond, MaxOps: 20000}, map[string]string{"services": "7"})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, ms, 2)
			m := ms[0]
			assert.Equal(t, "throughput-"+string(tt.mode), m.Name)
			assert.Equal(t, reports.UnitPerSecond, m.Unit)
			assert.Equal(t, map[string]string{"services": "7", "kind": string(tt.mode), "from": "a1,a2"}, m.Params)
			assert.NotEmpty(t, m.Samples)
			assert.Positive(t, m.Extra["ops"])
			assert.Zero(t, m.Extra["errors"])
			assert.Equal(t, 4.0, m.Extra["workers"])
			assert.Equal(t, 1.0, m.Extra["endpoints_answered"])
			assert.Equal(t, m.Extra["ops"], m.Extra["ops_a1"]+m.Extra["ops_a2"])
			assert.Positive(t, m.Extra["latency_p50_seconds"])
			assert.GreaterOrEqual(t, m.Extra["latency_p99_seconds"], m.Extra["latency_p50_seconds"])
			assert.Contains(t, m.Extra, "cpu_softirq_seconds")
			assert.Contains(t, m.Extra, "cpu_net_softirq_seconds")
			assert.Equal(t, "throughput-latency", ms[1].Name)
			assert.Equal(t, reports.UnitSeconds, ms[1].Unit)
			assert.LessOrEqual(t, len(ms[1].Samples), maxLatencySamples)
		})
	}
}
