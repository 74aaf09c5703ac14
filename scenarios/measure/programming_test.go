//go:build linux

package measure

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
)

// TestChangeLogAnalyze judges hand-made probes against hand-made syncs: every way a probe
// can be a misroute or a false refusal, and the ways it must not be one (in flight).
func TestChangeLogAnalyze(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	target := netip.MustParseAddrPort("10.96.0.10:80")
	// One sync carrying rv 5 ends at 100 ms; the next, carrying rv 9, at 300 ms.
	syncs := []agent.SyncRecord{
		{Start: at(50), End: at(100), ResourceVersion: 5},
		{Start: at(250), End: at(300), ResourceVersion: 9},
	}
	obs := func(svc string, start, end int, class probe.ErrClass, pod string) Observation {
		return Observation{Service: svc, Start: at(start), End: at(end), Class: class, Pod: pod}
	}
	tests := []struct {
		name                  string
		obs                   []Observation
		misroutes, refusals   int
		other                 int
		dataplane, unobserved int
	}{
		{"new endpoint answers after the sync", []Observation{obs("ns/a", 120, 125, probe.OK, "pod-c")}, 0, 0, 0, 1, 2},
		{"removed endpoint answers after the sync", []Observation{obs("ns/a", 120, 125, probe.OK, "pod-a")}, 1, 0, 0, 0, 3},
		{"removed endpoint answers while the sync runs", []Observation{obs("ns/a", 60, 70, probe.OK, "pod-a")}, 0, 0, 0, 0, 3},
		{"kept endpoint answers after the sync", []Observation{obs("ns/a", 120, 125, probe.OK, "pod-b")}, 0, 0, 0, 0, 3},
		{"live service refuses", []Observation{obs("ns/a", 120, 125, probe.Refused, "")}, 0, 1, 0, 0, 3},
		{"live service times out", []Observation{obs("ns/a", 120, 125, probe.Timeout, "")}, 0, 0, 1, 0, 3},
		{"added service refuses before its sync", []Observation{obs("ns/new", 20, 30, probe.Refused, "")}, 0, 0, 0, 0, 3},
		{"added service refuses after its sync", []Observation{obs("ns/new", 150, 160, probe.Refused, "")}, 0, 1, 0, 0, 3},
		{"added service answers after its sync", []Observation{obs("ns/new", 150, 160, probe.OK, "pod-x")}, 0, 0, 0, 1, 2},
		{"deleted service refuses while its delete is in flight", []Observation{obs("ns/new", 210, 220, probe.Refused, "")}, 0, 0, 0, 1, 2},
		{"deleted service answers after its delete synced", []Observation{obs("ns/new", 310, 320, probe.OK, "pod-x")}, 1, 0, 0, 1, 2},
		{"deleted service refuses after its delete synced", []Observation{obs("ns/new", 310, 320, probe.Refused, "")}, 0, 0, 0, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewChangeLog()
			l.Baseline("ns/a", target, []string{"pod-a", "pod-b"})
			// ns/a: pod-a replaced by pod-c at 10 ms (rv 4, carried by the first sync).
			l.Record(Change{Kind: ChangeEndpoint, Service: "ns/a", Trigger: at(10), RV: 4, Pods: []string{"pod-b", "pod-c"}, NewPod: "pod-c"}, netip.AddrPort{})
			// ns/new: added at 15 ms (rv 5), deleted at 200 ms (rv 9).
			l.Record(Change{Kind: ChangeAdd, Service: "ns/new", Trigger: at(15), RV: 5, Pods: []string{"pod-x"}}, netip.MustParseAddrPort("10.96.0.11:80"))
			l.Record(Change{Kind: ChangeDelete, Service: "ns/new", Trigger: at(200), RV: 9}, netip.AddrPort{})
			for _, o := range tt.obs {
				l.Observe(o)
			}
			res := l.Analyze(syncs)
			assert.Equal(t, tt.misroutes, res.Misroutes, "misroutes %v", res.Examples)
			assert.Equal(t, tt.refusals, res.FalseRefusals, "false refusals %v", res.Examples)
			assert.Equal(t, tt.other, res.OtherFailures, "other failures")
			assert.Len(t, res.DataplaneLatency, tt.dataplane, "changes seen")
			assert.Equal(t, tt.unobserved, res.Unobserved, "changes not seen")
			// Sync latency: every change was carried by a sync.
			require.Len(t, res.SyncLatency, 3)
			assert.Equal(t, 90*time.Millisecond, res.SyncLatency[0])
			assert.Equal(t, 85*time.Millisecond, res.SyncLatency[1])
			assert.Equal(t, 100*time.Millisecond, res.SyncLatency[2])
			assert.Zero(t, res.Unsynced)
			assert.Equal(t, map[string]int{ChangeEndpoint: 1, ChangeAdd: 1, ChangeDelete: 1}, res.Changes)
		})
	}
}

// TestFalseRefusalEvidence: the evidence of a false refusal names the target, the sync
// that programmed the endpoints, the syncs overlapping the probe and what later probes saw.
func TestFalseRefusalEvidence(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := NewChangeLog()
	l.Record(Change{Kind: ChangeAdd, Service: "ns/new", Trigger: at(15), RV: 5, Pods: []string{"pod-x"}}, netip.MustParseAddrPort("10.96.0.11:80"))
	l.Observe(Observation{Service: "ns/new", Start: at(120), End: at(260), Class: probe.Refused})
	l.Observe(Observation{Service: "ns/new", Start: at(270), End: at(275), Class: probe.OK, Pod: "pod-x"})
	l.Observe(Observation{Service: "ns/new", Start: at(280), End: at(380), Class: probe.Timeout})
	res := l.Analyze([]agent.SyncRecord{
		{Start: at(50), End: at(100), ResourceVersion: 5},
		{Start: at(250), End: at(300), ResourceVersion: 6, Result: backends.SyncResult{ChangedServices: 2}},
	})
	require.Equal(t, 1, res.FalseRefusals)
	require.Len(t, res.Examples, 1)
	assert.Equal(t, "false refusal: ns/new (10.96.0.11:80) probed 12:00:00.120-12:00:00.260, endpoints [pod-x] "+
		"(add change at 12:00:00.015, synced by 12:00:00.100); syncs during the probe [12:00:00.250-12:00:00.300 (2 changed)]; "+
		"later probes of it: 1 answered, 0 refused, 1 other", res.Examples[0])
}

// TestChangeLogUnsyncedAndFailedSyncs: a change no successful sync carried is unsynced,
// and a failed sync does not count as programming it.
func TestChangeLogUnsyncedAndFailedSyncs(t *testing.T) {
	t0 := time.Now()
	l := NewChangeLog()
	l.Record(Change{Kind: ChangeAdd, Service: "ns/s", Trigger: t0, RV: 3, Pods: []string{"p"}}, netip.MustParseAddrPort("10.96.0.1:80"))
	res := l.Analyze([]agent.SyncRecord{{Start: t0, End: t0.Add(time.Millisecond), ResourceVersion: 3, Err: assert.AnError}})
	assert.Equal(t, 1, res.Unsynced)
	assert.Empty(t, res.SyncLatency)
	lat := res.LatencyMeasurements(map[string]string{"backend": "x"})
	require.Len(t, lat, 2)
	assert.Equal(t, reports.MeasureProgrammingLatency, lat[0].Name)
	assert.Equal(t, 1.0, lat[0].Extra["unsynced"])
	assert.Equal(t, "x", lat[0].Params["backend"])
	assert.Equal(t, 1.0, lat[1].Extra["changes_add"])
	cor := res.CorrectnessMeasurements(nil)
	require.Len(t, cor, 3)
	assert.Equal(t, reports.MeasureChurnMisroutes, cor[0].Name)
	assert.Equal(t, []float64{0}, cor[0].Samples)
}

// TestChangeLogPending: the prober is pointed at unseen changes until they are seen or
// past the deadline.
func TestChangeLogPending(t *testing.T) {
	t0 := time.Now()
	l := NewChangeLog()
	l.Record(Change{Kind: ChangeAdd, Service: "ns/a", Trigger: t0, RV: 1, Pods: []string{"p"}}, netip.MustParseAddrPort("10.96.0.1:80"))
	l.Record(Change{Kind: ChangeAdd, Service: "ns/b", Trigger: t0.Add(time.Second), RV: 2, Pods: []string{"q"}}, netip.MustParseAddrPort("10.96.0.2:80"))
	assert.Equal(t, []string{"ns/a", "ns/b"}, l.Pending(t0.Add(time.Second), 10*time.Second))
	l.Observe(Observation{Service: "ns/a", Start: t0.Add(time.Second), End: t0.Add(time.Second), Class: probe.OK, Pod: "p"})
	assert.Equal(t, []string{"ns/b"}, l.Pending(t0.Add(time.Second), 10*time.Second))
	assert.Empty(t, l.Pending(t0.Add(12*time.Second), 10*time.Second), "past the deadline")
	assert.ElementsMatch(t, []string{"ns/a", "ns/b"}, l.Recent(t0.Add(2*time.Second), 3*time.Second))
}

// TestChurnBounds: a churn whose prober saw too few live probes, or lost too many of
// them to timeouts, fails; one within both bounds passes.
func TestChurnBounds(t *testing.T) {
	b := ChurnBounds{MinLiveProbes: 100, MaxFailedShare: 0.01}
	tests := []struct {
		name    string
		res     ChurnResult
		wantErr string
	}{
		{"within the bounds", ChurnResult{Probes: 1200, LiveProbes: 1000, OtherFailures: 10}, ""},
		{"too few probes", ChurnResult{Probes: 120, LiveProbes: 99}, "too few probes to judge: 99 of live Services (120 in all), at least 100"},
		{"a Service's traffic dropped", ChurnResult{Probes: 1200, LiveProbes: 1000, OtherFailures: 11}, "11 of 1000 probes of live Services timed out or were reset (1.10%), more than 1%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.res.Check(b)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	// Analyze counts the live probes: a timeout of a live Service is one, a probe of a
	// Service not programmed yet is not.
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := NewChangeLog()
	l.Baseline("ns/a", netip.MustParseAddrPort("10.96.0.10:80"), []string{"pod-a"})
	l.Record(Change{Kind: ChangeAdd, Service: "ns/new", Trigger: t0, RV: 5, Pods: []string{"pod-x"}}, netip.MustParseAddrPort("10.96.0.11:80"))
	l.Observe(Observation{Service: "ns/a", Start: t0, End: t0.Add(time.Millisecond), Class: probe.Timeout})
	l.Observe(Observation{Service: "ns/new", Start: t0, End: t0.Add(time.Millisecond), Class: probe.Timeout})
	res := l.Analyze([]agent.SyncRecord{{Start: t0.Add(time.Second), End: t0.Add(2 * time.Second), ResourceVersion: 5}})
	assert.Equal(t, 1, res.LiveProbes)
	assert.Equal(t, 1, res.OtherFailures)
}
