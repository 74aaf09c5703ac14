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

// For returns the declaration as it applies to the measurements of one cell: where any of
// them was declared informational by its scenario (Measurement.Informational), the cell
// is shown and never gated.
func (f Metric) For(ms ...*Measurement) Metric {
	for _, m := range ms {
		if m != nil && m.Informational != "" {
			f.Gated = false
		}
	}
	return f
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

// metricOf returns the declaration of m in r: the one r holds, else the one kpbench read
// files without declarations with (LegacyMetrics), else the one it declares today; false
// for a measurement none declares.
func metricOf(r *Results, m *Measurement) (Metric, bool) {
	if d, ok := MetricOf(r.Metrics, m); ok {
		return d, true
	}
	if d, ok := MetricOf(LegacyMetrics(), m); ok {
		return d, true
	}
	if ms, ok := measureNamed(Measures(), m.Name); ok {
		return MetricOf(ms.Metrics, m)
	}
	return Metric{}, false
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
