package reports

import (
	"maps"
	"slices"
)

// Better says which direction of a metric is an improvement.
type Better string

// Directions of improvement.
const (
	// LowerIsBetter: times, memory, rule counts.
	LowerIsBetter Better = "lower"
	// HigherIsBetter: rates, p-values of a fit.
	HigherIsBetter Better = "higher"
	// NoDirection: the metric describes, it does not rank (a count of endpoints hit).
	NoDirection Better = ""
)

// Tests that a gate applies to a metric's samples.
const (
	// TestLocation compares the location of two sample sets (Mann-Whitney U), and the
	// change of their median against the threshold.
	TestLocation = "location"
	// TestFit judges a distribution: the samples are counts per endpoint, and the fit
	// to the expected shares (chi-square) must not turn into a misfit.
	TestFit = "fit"
	// TestExact compares a single deterministic value (a rule count): any change is a
	// difference.
	TestExact = "exact"
)

// Metric declares what one measurement produces, so that reports and compare can draw
// and judge it without knowing its name. Measurements declare their metrics where they
// are registered (scenarios); a run records the declarations of everything it measured
// in Results.Metrics, so a results file describes itself.
type Metric struct {
	// Measurement is the Measurement.Name this declaration describes ("sync").
	Measurement string `json:"measurement"`
	// Match narrows the declaration to the measurements whose Params hold every key and
	// value of Match (e.g. {"position": "established"} for the lookup's control). Empty:
	// every measurement of that name. The most specific matching declaration wins.
	Match map[string]string `json:"match,omitempty"`
	// Title names the metric for readers ("full sync", "first-packet latency").
	Title string `json:"title,omitempty"`
	// Unit of the samples (one of the Unit* constants).
	Unit string `json:"unit"`
	// Better is the direction of improvement.
	Better Better `json:"better,omitempty"`
	// Gated metrics are judged by compare and gates: a significant change in the wrong
	// direction fails them. Metrics that are not gated are shown, never judged.
	Gated bool `json:"gated,omitempty"`
	// Test is how a gate judges the samples: TestLocation (default), TestFit, TestExact.
	Test string `json:"test,omitempty"`
	// MinSamples is the fewest samples per side a verdict needs (0: the test's own
	// minimum). Fewer is "cannot judge", never a pass.
	MinSamples int `json:"minSamples,omitempty"`
	// Statistics are the summary statistics a gate judges besides the location test,
	// e.g. ["p50", "p99"] (empty: the median only).
	Statistics []string `json:"statistics,omitempty"`
	// Control, when set, names the measurement that ran beside this one to measure the
	// machine itself (the established-connection control beside a lookup): the Params
	// of this measurement with Control's keys and values replacing theirs (an empty
	// value removes the key). compare
	// normalises by the drift of the control between two runs (see EstimateDrift).
	Control map[string]string `json:"control,omitempty"`
}

// LegacyMetrics are the declarations of the measurements kpbench recorded before results
// files carried their own (Results.Metrics empty): compare and reports read such files
// with these. They describe those files, so they do not change when a measurement's
// declaration does.
var LegacyMetrics = []Metric{
	{Measurement: MeasureSync, Match: map[string]string{"kind": "full"}, Title: "full sync", Unit: UnitSeconds, Better: LowerIsBetter,
		Gated: true, Test: TestLocation, MinSamples: 5, Statistics: []string{"p50"}},
	{Measurement: MeasureSync, Match: map[string]string{"kind": "partial"}, Title: "partial sync", Unit: UnitSeconds, Better: LowerIsBetter,
		Gated: true, Test: TestLocation, MinSamples: 5, Statistics: []string{"p50"}},
	{Measurement: MeasureLookup, Title: "first-packet latency", Unit: UnitSeconds, Better: LowerIsBetter,
		Gated: true, Test: TestLocation, MinSamples: 50, Statistics: []string{"p50", "p99"}, Control: lookupControl},
	{Measurement: MeasureLookup, Match: map[string]string{"position": "established"}, Title: "established-connection latency (control)",
		Unit: UnitSeconds, Better: LowerIsBetter},
	{Measurement: MeasureDistribution, Title: "connections per endpoint", Unit: UnitCount, Gated: true, Test: TestFit, MinSamples: 2},
	{Measurement: MeasureRules, Title: "rules in the kernel", Unit: UnitCount, Better: LowerIsBetter, Gated: true, Test: TestExact, MinSamples: 1},
	{Measurement: MeasureRulesMemory, Title: "kernel memory of the rules", Unit: UnitBytes, Better: LowerIsBetter},
	{Measurement: MeasureProgrammingLatency, Title: "programming latency", Unit: UnitSeconds, Better: LowerIsBetter,
		Gated: true, Test: TestLocation, MinSamples: 20, Statistics: []string{"p50", "p99"}},
	{Measurement: MeasureThroughput, Title: "throughput", Unit: UnitPerSecond, Better: HigherIsBetter,
		Gated: true, Test: TestLocation, MinSamples: 10, Statistics: []string{"p50"}},
	{Measurement: MeasureThroughputConnections, Title: "new connections per second", Unit: UnitPerSecond, Better: HigherIsBetter,
		Gated: true, Test: TestLocation, MinSamples: 10, Statistics: []string{"p50"}},
	{Measurement: MeasureThroughputRequests, Title: "kept-alive requests per second", Unit: UnitPerSecond, Better: HigherIsBetter,
		Gated: true, Test: TestLocation, MinSamples: 10, Statistics: []string{"p50"}},
}

// lookupControl names the established-connection control beside every lookup position.
var lookupControl = map[string]string{"kind": "established", "position": "established"}

// LookupControl returns the Control of lookup declarations: the established-connection
// control measured beside every position.
func LookupControl() map[string]string { return maps.Clone(lookupControl) }

// ControlSuffix ends the kind of a sync's machine control: "full-control" is measured
// around every full sync, "partial-control" around every partial one.
const ControlSuffix = "-control"

// SyncControl returns the Control of the sync declaration of kind (full, partial): the
// machine control timed around every sync of that kind.
func SyncControl(kind string) map[string]string {
	return map[string]string{"kind": kind + ControlSuffix}
}

// Matches reports whether the declaration describes m.
func (f Metric) Matches(m *Measurement) bool {
	if f.Measurement != m.Name {
		return false
	}
	for k, v := range f.Match {
		if m.Params[k] != v {
			return false
		}
	}
	return true
}

// MetricOf returns the declaration that describes m among figs: the matching one with
// the most Match keys (ties: the first). ok is false when none matches.
func MetricOf(figs []Metric, m *Measurement) (f Metric, ok bool) {
	best := -1
	for _, c := range figs {
		if c.Matches(m) && len(c.Match) > best {
			f, ok, best = c, true, len(c.Match)
		}
	}
	return f, ok
}

// Declare adds figs to the results' declarations, once each (same measurement and
// match).
func (r *Results) Declare(figs ...Metric) {
	for _, f := range figs {
		if !slices.ContainsFunc(r.Metrics, func(g Metric) bool {
			return g.Measurement == f.Measurement && maps.Equal(g.Match, f.Match)
		}) {
			r.Metrics = append(r.Metrics, f)
		}
	}
}
