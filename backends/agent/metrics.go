package agent

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"
)

// Metrics are the agent's counters and samples, named after kube-proxy's metrics
// (subsystem kubeproxy_). Samples are kept raw; the exposition renders histograms.
type Metrics struct {
	// SyncProxyRules, SyncFull and SyncPartial are sync durations
	// (kubeproxy_sync_proxy_rules_duration_seconds, ..._full_..., ..._partial_...).
	SyncProxyRules, SyncFull, SyncPartial []time.Duration
	// NetworkProgramming are the latencies from an EndpointSlice's trigger time to the end
	// of the sync that programmed it (kubeproxy_network_programming_duration_seconds).
	NetworkProgramming []time.Duration
	// EndpointChanges and ServiceChanges count changes received
	// (kubeproxy_sync_proxy_rules_endpoint_changes_total, ..._service_changes_total).
	EndpointChanges, ServiceChanges int
	// RestoreFailures counts failed syncs (kubeproxy_sync_proxy_rules_iptables_restore_failures_total).
	RestoreFailures int
	// LastRules is the number of rules written by the last full sync
	// (kubeproxy_sync_proxy_rules_iptables_total, summed over tables).
	LastRules int
	// LastSync is when the last successful sync ended
	// (kubeproxy_sync_proxy_rules_last_timestamp_seconds).
	LastSync time.Time
	// StateLost counts state checks that found the kernel state gone (kube-proxy logs a
	// vanished canary and resyncs; kpbench counts it as kpbench_proxy_state_lost_total).
	StateLost int
}

func newMetrics() Metrics { return Metrics{} }

func (m *Metrics) observeSync(r SyncRecord) {
	if r.Err != nil {
		m.RestoreFailures++
		return
	}
	d := r.Duration()
	m.SyncProxyRules = append(m.SyncProxyRules, d)
	if r.Result.Full {
		m.SyncFull = append(m.SyncFull, d)
		m.LastRules = r.Result.Rules
	} else {
		m.SyncPartial = append(m.SyncPartial, d)
	}
	m.LastSync = r.End
}

func (m Metrics) clone() Metrics {
	m.SyncProxyRules = slices.Clone(m.SyncProxyRules)
	m.SyncFull = slices.Clone(m.SyncFull)
	m.SyncPartial = slices.Clone(m.SyncPartial)
	m.NetworkProgramming = slices.Clone(m.NetworkProgramming)
	return m
}

// syncBuckets are kube-proxy's sync duration buckets: 1ms doubling, 15 buckets.
func syncBuckets() []float64 {
	b := make([]float64, 15)
	v := 0.001
	for i := range b {
		b[i] = v
		v *= 2
	}
	return b
}

// programmingBuckets are kube-proxy's network programming latency buckets: 0.25s and 0.5s,
// then every second to 59s, every 5s to 115s and every 30s to 5min.
func programmingBuckets() []float64 {
	b := []float64{0.25, 0.5}
	for v := 1; v <= 59; v++ {
		b = append(b, float64(v))
	}
	for v := 60; v <= 115; v += 5 {
		b = append(b, float64(v))
	}
	for v := 120; v <= 300; v += 30 {
		b = append(b, float64(v))
	}
	return b
}

// errWriter remembers the first write error, so that the exposition can be written without
// checking every line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// WriteProm writes the metrics in the Prometheus text format, with a node label. It returns
// the first write error.
func (m Metrics) WriteProm(out io.Writer, node string) error {
	w := &errWriter{w: out}
	hist := func(name, help string, buckets []float64, samples []time.Duration) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
		secs := make([]float64, len(samples))
		sum := 0.0
		for i, d := range samples {
			secs[i] = d.Seconds()
			sum += secs[i]
		}
		sort.Float64s(secs)
		for _, le := range buckets {
			n := sort.SearchFloat64s(secs, le+1e-12)
			fmt.Fprintf(w, "%s_bucket{node=%q,le=\"%g\"} %d\n", name, node, le, n)
		}
		fmt.Fprintf(w, "%s_bucket{node=%q,le=\"+Inf\"} %d\n%s_sum{node=%q} %g\n%s_count{node=%q} %d\n", name, node, len(secs), name, node, sum, name, node, len(secs))
	}
	counter := func(name, help string, v int) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s{node=%q} %d\n", name, help, name, name, node, v)
	}
	hist("kubeproxy_sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds", syncBuckets(), m.SyncProxyRules)
	hist("kubeproxy_sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs", syncBuckets(), m.SyncFull)
	hist("kubeproxy_sync_partial_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for partial resyncs", syncBuckets(), m.SyncPartial)
	hist("kubeproxy_network_programming_duration_seconds", "In Cluster Network Programming Latency in seconds", programmingBuckets(), m.NetworkProgramming)
	counter("kubeproxy_sync_proxy_rules_endpoint_changes_total", "Cumulative proxy rules Endpoint changes", m.EndpointChanges)
	counter("kubeproxy_sync_proxy_rules_service_changes_total", "Cumulative proxy rules Service changes", m.ServiceChanges)
	counter("kubeproxy_sync_proxy_rules_iptables_restore_failures_total", "Cumulative proxy rules restore failures", m.RestoreFailures)
	counter("kpbench_proxy_state_lost_total", "State checks that found the proxy rules gone from the kernel (repaired by a full sync)", m.StateLost)
	fmt.Fprintf(w, "# HELP kubeproxy_sync_proxy_rules_iptables_total Number of proxy rules programmed\n# TYPE kubeproxy_sync_proxy_rules_iptables_total gauge\nkubeproxy_sync_proxy_rules_iptables_total{node=%q} %d\n", node, m.LastRules)
	if !m.LastSync.IsZero() {
		fmt.Fprintf(w, "# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds The last time proxy rules were successfully synced\n# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{node=%q} %d\n", node, m.LastSync.Unix())
	}
	if w.err != nil {
		return fmt.Errorf("write metrics of node %s: %w", node, w.err)
	}
	return nil
}
