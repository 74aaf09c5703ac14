//go:build linux

package kubeproxy

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sampleMetrics = `# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.75
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 0.5
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 3
kubeproxy_sync_full_proxy_rules_duration_seconds_sum 0.5
kubeproxy_sync_full_proxy_rules_duration_seconds_count 1
kubeproxy_sync_proxy_rules_iptables_total{table="filter"} 4
kubeproxy_sync_proxy_rules_iptables_total{table="nat"} 20
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7645e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7646e+09
kubeproxy_sync_proxy_rules_endpoint_changes_pending 0
kubeproxy_sync_proxy_rules_service_changes_pending 0
kubeproxy_sync_proxy_rules_endpoint_changes_total 5
kubeproxy_sync_proxy_rules_service_changes_total 2
`

func TestParseMetrics(t *testing.T) {
	s, err := ParseMetrics(strings.NewReader(sampleMetrics))
	require.NoError(t, err)
	// v1.37 serves one series per IP family (dual-stack proxiers); the lab is IPv4.
	assert.Equal(t, 0.75, s[MetricSyncDuration+"_sum"])
	assert.Equal(t, 3.0, s[MetricSyncDuration+"_count"])
	assert.Equal(t, 1.7645e+09, s[MetricLastSync], "a timestamp, not the sum of two")
	assert.Equal(t, 24.0, s[MetricIPTablesTotal], "summed over tables")
	assert.Equal(t, 7.0, s.changes())
	assert.False(t, s.Has(MetricSyncDuration+"_bucket"))
	assert.False(t, s.Has(MetricLastQueued))

	for _, bad := range []string{"x{a=\"b\" 1", "x\n", "x abc\n"} {
		_, err := ParseMetrics(strings.NewReader(bad))
		assert.Error(t, err, bad)
	}
}

func TestDelta(t *testing.T) {
	prev := Samples{"c": 10}
	assert.Equal(t, 5.0, delta(Samples{"c": 15}, prev, "c"))
	assert.Equal(t, 3.0, delta(Samples{"c": 3}, prev, "c"), "restarted process: counters start again")
	assert.Equal(t, 4.0, delta(Samples{"c": 4}, nil, "c"))
}

func TestDone(t *testing.T) {
	pub := time.Now()
	secs := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
	after, before := secs(pub.Add(100*time.Millisecond)), secs(pub.Add(-time.Second))
	synced := func(last, changes, pending float64) Samples {
		return Samples{MetricSyncDuration + "_count": 1, MetricLastSync: last, MetricEndpointsTotal: changes, MetricEndpointsPending: pending}
	}
	tests := []struct {
		name      string
		prev      Samples
		cur       Samples
		published time.Time
		lastStart float64
		services  bool // the set of Services changed
		want      bool
	}{
		{name: "never synced", cur: Samples{}, published: pub},
		{name: "first sync after publication", cur: synced(after, 3, 0), published: pub, want: true},
		{name: "changes pending", cur: synced(after, 3, 1), published: pub},
		{name: "synced after publication, change received", prev: synced(before, 3, 0), cur: synced(after, 4, 0), published: pub, want: true},
		{name: "synced after publication, change not received yet", prev: synced(before, 3, 0), cur: synced(after, 3, 0), published: pub},
		// A new Service's slice reached kube-proxy first (separate informers): the sync
		// for it programmed nothing for the Service.
		{name: "new Service, only its slice received", prev: synced(before, 3, 0), cur: synced(after, 4, 0), published: pub, services: true},
		{name: "new Service, Service received", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(after, 4, 0)
			s[MetricServicesTotal] = 1
			return s
		}(), published: pub, services: true, want: true},
		{name: "last sync before publication", prev: synced(before, 3, 0), cur: synced(before, 4, 0), published: pub},
		{name: "ignored change, settle passed", prev: synced(before, 3, 0), cur: synced(before, 3, 0), published: pub.Add(-time.Hour), want: true},
		{name: "queued after the last sync", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(before, 3, 0)
			s[MetricLastQueued] = after
			return s
		}(), published: pub.Add(-time.Hour)},
		// kube-proxy took the change while a sync ran (pending already emptied): that sync
		// ended after the publication, but started before the change was queued.
		{name: "queued during the last sync", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(after, 4, 0)
			s[MetricLastQueued] = secs(pub.Add(50 * time.Millisecond))
			return s
		}(), published: pub, lastStart: secs(pub.Add(10 * time.Millisecond))},
		{name: "queued during the last sync, ignored change settled", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(before, 3, 0)
			s[MetricLastQueued] = secs(pub.Add(-2 * time.Second).Add(50 * time.Millisecond))
			return s
		}(), published: pub.Add(-2 * time.Second), lastStart: secs(pub.Add(-2 * time.Second))},
		{name: "start estimate lagging, long after the publication", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(before, 3, 0)
			s[MetricLastQueued] = secs(pub.Add(-time.Hour).Add(50 * time.Millisecond))
			return s
		}(), published: pub.Add(-time.Hour), lastStart: secs(pub.Add(-time.Hour)), want: true},
		// Measured: kube-proxy's timestamp minus duration put a sync 0.6 ms before the
		// queueing of the change that triggered it (see startSlack).
		{name: "start estimate just before the queueing (timestamp set before the end)", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(after, 4, 0)
			s[MetricLastQueued] = secs(pub.Add(10*time.Millisecond + 600*time.Microsecond))
			return s
		}(), published: pub, lastStart: secs(pub.Add(10 * time.Millisecond)), want: true},
		{name: "queued well after the start: a later sync carries it", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(after, 4, 0)
			s[MetricLastQueued] = secs(pub.Add(10*time.Millisecond + 3*startSlack))
			return s
		}(), published: pub, lastStart: secs(pub.Add(10 * time.Millisecond))},
		{name: "the last sync started after the change was queued", prev: synced(before, 3, 0), cur: func() Samples {
			s := synced(after, 4, 0)
			s[MetricLastQueued] = secs(pub.Add(10 * time.Millisecond))
			return s
		}(), published: pub, lastStart: secs(pub.Add(50 * time.Millisecond)), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &Backend{opts: Options{Settle: time.Second}, prev: tc.prev, lastStart: tc.lastStart}
			assert.Equal(t, tc.want, b.done(tc.cur, tc.published, tc.services))
		})
	}
}

// TestSyncStart: one sync between two scrapes started its duration before its end; after
// several, the latest started after the earlier scrape; after none, the estimate stands.
func TestSyncStart(t *testing.T) {
	at := time.Unix(1000, 0)
	scrape := func(count, sum, last float64) Samples {
		return Samples{MetricSyncDuration + "_count": count, MetricSyncDuration + "_sum": sum, MetricLastSync: last}
	}
	tests := []struct {
		name      string
		prev, cur Samples
		est, want float64
	}{
		{"no sync since", scrape(3, 1.5, 990), scrape(3, 1.5, 990), 989.5, 989.5},
		{"one sync", scrape(3, 1.5, 990), scrape(4, 1.75, 1000.5), 989.5, 1000.25},
		{"first scrape of a new process", nil, scrape(1, 0.2, 1000.5), 0, 1000.3},
		{"two syncs", scrape(3, 1.5, 990), scrape(5, 2, 1001), 989.5, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, syncStart(tt.prev, at, tt.cur, tt.est), 1e-9)
		})
	}
}

// TestQuietFor: a sync whose start estimate falls just before the last queued change may
// have missed it, so the quiet period also covers a follow-up sync of the same length.
func TestQuietFor(t *testing.T) {
	tests := []struct {
		name      string
		lastStart float64
		queued    float64 // 0: the metric is absent
		want      time.Duration
	}{
		{name: "no queue timestamp", lastStart: 100, want: quietPeriod},
		{name: "started after the change was queued", lastStart: 100, queued: 99.5, want: quietPeriod},
		{name: "started just before (within the slack)", lastStart: 100, queued: 100.001, want: quietPeriod + 80*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Backend{lastStart: tt.lastStart, lastDur: 0.040}
			s := Samples{}
			if tt.queued != 0 {
				s[MetricLastQueued] = tt.queued
			}
			assert.InDelta(t, float64(tt.want), float64(b.quietFor(s)), float64(time.Microsecond))
		})
	}
}

// TestProgrammedAt: the change is in place when kube-proxy's latest sync ended, or at its
// publication when no sync ended after it.
func TestProgrammedAt(t *testing.T) {
	published := time.Unix(1000, 500_000_000)
	tests := []struct {
		name string
		last float64 // 0: the metric is absent
		want time.Time
	}{
		{name: "sync ended after the publication", last: 1000.75, want: time.Unix(1000, 750_000_000)},
		{name: "no sync since the publication", last: 999.0, want: published},
		{name: "no sync yet", want: published},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Samples{}
			if tt.last != 0 {
				s[MetricLastSync] = tt.last
			}
			assert.WithinDuration(t, tt.want, programmedAt(s, published), time.Microsecond)
		})
	}
}
