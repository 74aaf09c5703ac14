package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bt "kpbench.dev/kpbench/backends/backendstest"
)

// parseProm parses the Prometheus text format: series (name{labels}) to value, and metric
// name to type.
func parseProm(t *testing.T, text string) (series map[string]float64, types map[string]string) {
	t.Helper()
	series, types = map[string]float64{}, map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, found := strings.Cut(f, " ")
			require.True(t, found, "bad TYPE line %q", line)
			types[name] = typ
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "bad sample line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "line %q", line)
		_, dup := series[line[:i]]
		require.False(t, dup, "duplicate series %q", line[:i])
		series[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return series, types
}

func bucket(name, le string) string { return name + `_bucket{node="n1",le="` + le + `"}` }

func TestWritePromHistograms(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	m := Metrics{
		SyncProxyRules: []time.Duration{ms(0.5), ms(1), ms(3), 20 * time.Second},
		SyncFull:       []time.Duration{ms(1), 20 * time.Second},
		SyncPartial:    []time.Duration{ms(0.5), ms(3)},
		NetworkProgramming: []time.Duration{
			200 * time.Millisecond, 250 * time.Millisecond, 1500 * time.Millisecond,
			70 * time.Second, 400 * time.Second,
		},
	}
	var buf bytes.Buffer
	require.NoError(t, m.WriteProm(&buf, "n1"))
	series, types := parseProm(t, buf.String())

	tests := []struct {
		name    string
		buckets int                // le values besides +Inf
		want    map[string]float64 // le -> cumulative count
		count   float64
		sum     float64
		lastLe  string
		firstLe string
	}{
		{
			name:    "kubeproxy_sync_proxy_rules_duration_seconds",
			buckets: 15, firstLe: "0.001", lastLe: "16.384",
			want:  map[string]float64{"0.001": 2, "0.002": 2, "0.004": 3, "8.192": 3, "16.384": 3, "+Inf": 4},
			count: 4, sum: 20.0045,
		},
		{
			name:    "kubeproxy_sync_full_proxy_rules_duration_seconds",
			buckets: 15, firstLe: "0.001", lastLe: "16.384",
			want:  map[string]float64{"0.001": 1, "0.002": 1, "16.384": 1, "+Inf": 2},
			count: 2, sum: 20.001,
		},
		{
			name:    "kubeproxy_sync_partial_proxy_rules_duration_seconds",
			buckets: 15, firstLe: "0.001", lastLe: "16.384",
			want:  map[string]float64{"0.001": 1, "0.002": 1, "0.004": 2, "+Inf": 2},
			count: 2, sum: 0.0035,
		},
		{
			name:    "kubeproxy_network_programming_duration_seconds",
			buckets: 80, firstLe: "0.25", lastLe: "300",
			want: map[string]float64{
				"0.25": 2, "0.5": 2, "1": 2, "2": 3, "59": 3, "60": 3, "65": 3, "70": 4,
				"115": 4, "120": 4, "150": 4, "300": 4, "+Inf": 5,
			},
			count: 5, sum: 471.95,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, "histogram", types[tt.name])
			for le, want := range tt.want {
				got, ok := series[bucket(tt.name, le)]
				if assert.True(t, ok, "no bucket le=%s", le) {
					assert.Equal(t, want, got, "bucket le=%s", le)
				}
			}
			for _, le := range []string{tt.firstLe, tt.lastLe} {
				_, ok := series[bucket(tt.name, le)]
				assert.True(t, ok, "no bucket le=%s", le)
			}
			// Buckets: the right number, cumulative (non-decreasing in le).
			type b struct{ le, n float64 }
			var bs []b
			for k, v := range series {
				rest, ok := strings.CutPrefix(k, tt.name+`_bucket{node="n1",le="`)
				if !ok || strings.HasPrefix(rest, "+Inf") {
					continue
				}
				le, err := strconv.ParseFloat(strings.TrimSuffix(rest, `"}`), 64)
				require.NoError(t, err)
				bs = append(bs, b{le, v})
			}
			assert.Len(t, bs, tt.buckets)
			for _, x := range bs {
				for _, y := range bs {
					if x.le < y.le {
						assert.LessOrEqual(t, x.n, y.n, "le=%g above le=%g", x.le, y.le)
					}
				}
			}
			assert.Equal(t, tt.count, series[tt.name+`_count{node="n1"}`])
			assert.InDelta(t, tt.sum, series[tt.name+`_sum{node="n1"}`], 1e-9)
		})
	}
}

func TestWritePromCountersAndGauges(t *testing.T) {
	last := time.Unix(1700000000, 0)
	tests := []struct {
		name     string
		m        Metrics
		want     map[string]float64
		wantType map[string]string
		absent   []string
	}{
		{
			name: "after syncs",
			m:    Metrics{EndpointChanges: 7, ServiceChanges: 3, RestoreFailures: 2, LastRules: 42, LastSync: last},
			want: map[string]float64{
				`kubeproxy_sync_proxy_rules_endpoint_changes_total{node="n1"}`:               7,
				`kubeproxy_sync_proxy_rules_service_changes_total{node="n1"}`:                3,
				`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{node="n1"}`:      2,
				`kubeproxy_sync_proxy_rules_iptables_total{node="n1"}`:                       42,
				`kubeproxy_sync_proxy_rules_last_timestamp_seconds{node="n1"}`:               1700000000,
				`kubeproxy_sync_proxy_rules_duration_seconds_count{node="n1"}`:               0,
				`kubeproxy_network_programming_duration_seconds_bucket{node="n1",le="+Inf"}`: 0,
			},
			wantType: map[string]string{
				"kubeproxy_sync_proxy_rules_endpoint_changes_total":          "counter",
				"kubeproxy_sync_proxy_rules_service_changes_total":           "counter",
				"kubeproxy_sync_proxy_rules_iptables_restore_failures_total": "counter",
				"kubeproxy_sync_proxy_rules_iptables_total":                  "gauge",
				"kubeproxy_sync_proxy_rules_last_timestamp_seconds":          "gauge",
			},
		},
		{
			name:   "never synced: no last timestamp",
			m:      Metrics{},
			want:   map[string]float64{`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{node="n1"}`: 0},
			absent: []string{`kubeproxy_sync_proxy_rules_last_timestamp_seconds{node="n1"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, tt.m.WriteProm(&buf, "n1"))
			series, types := parseProm(t, buf.String())
			for k, v := range tt.want {
				got, ok := series[k]
				if assert.True(t, ok, "missing %s", k) {
					assert.Equal(t, v, got, k)
				}
			}
			for k, v := range tt.wantType {
				assert.Equal(t, v, types[k], k)
			}
			for _, k := range tt.absent {
				_, ok := series[k]
				assert.False(t, ok, "unexpected %s", k)
			}
		})
	}
}

// failingWriter fails after n bytes.
type failingWriter struct{ n int }

var errWrite = errors.New("disk full")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errWrite
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWritePromReportsWriteErrors(t *testing.T) {
	tests := []struct {
		name  string
		after int
	}{
		{name: "first write", after: 0},
		{name: "mid-way", after: 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Metrics{LastSync: time.Unix(1, 0)}.WriteProm(&failingWriter{n: tt.after}, "n1")
			assert.ErrorIs(t, err, errWrite)
		})
	}
}

// TestAgentMetrics checks the metrics an agent records through real syncs.
func TestAgentMetrics(t *testing.T) {
	clock := &fakeClock{now: t0}
	be := newFakeBackend()
	a := newAgent(be, clock.Now, 0, 0)
	a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
	a.Observe(Change{Slice: bt.SliceObject("a-1", "a", "http", 8080, t0.Add(-time.Second), "10.244.1.1"), ResourceVersion: 2})
	require.NoError(t, a.SyncNow(context.Background()).Err) // first: full
	a.Observe(Change{Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}, "10.244.1.2"), ResourceVersion: 3})
	require.NoError(t, a.SyncNow(context.Background()).Err) // partial
	be.failSyncs(1)
	require.Error(t, a.SyncNow(context.Background()).Err)

	m := a.Metrics()
	assert.Equal(t, 1, m.ServiceChanges)
	assert.Equal(t, 2, m.EndpointChanges)
	assert.Equal(t, 1, m.RestoreFailures)
	assert.Len(t, m.SyncProxyRules, 2)
	assert.Len(t, m.SyncFull, 1)
	assert.Len(t, m.SyncPartial, 1)
	assert.Equal(t, 10, m.LastRules)
	assert.Equal(t, []time.Duration{time.Second}, m.NetworkProgramming)

	// Metrics is a snapshot: later syncs do not change it.
	require.NoError(t, a.SyncNow(context.Background()).Err)
	assert.Len(t, m.SyncProxyRules, 2)
	assert.Len(t, a.Metrics().SyncProxyRules, 3)

	var buf bytes.Buffer
	require.NoError(t, a.Metrics().WriteProm(&buf, a.Node()))
	series, _ := parseProm(t, buf.String())
	assert.Equal(t, 3.0, series[`kubeproxy_sync_proxy_rules_duration_seconds_count{node="node-a"}`])
	assert.Equal(t, 1.0, series[`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{node="node-a"}`])
}
