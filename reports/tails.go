package reports

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"kpbench.dev/kpbench/reports/stats"
)

// OutlierFactor is how far from its measurement's median a sample must be to be flagged
// as an outlier: more than 10 times the median (or less than a tenth of it, for rates).
const OutlierFactor = 10

// minOutlierSamples is the fewest samples a measurement needs before one can stand out
// from the rest: with two, the median sits halfway between them.
const minOutlierSamples = 3

// Outlier is one sample far from the rest of its measurement.
type Outlier struct {
	// Backend, Name and Params locate the measurement.
	Backend string
	Name    string
	Params  map[string]string
	Unit    string
	// Index is the sample's position in Samples, N the number of samples.
	Index, N int
	// Value is the sample, Median the median of its measurement.
	Value, Median float64
	// Step is the scenario step that took it ("" when not recorded).
	Step string
	// At is when the sample ended, when the measurement recorded per-sample offsets;
	// otherwise zero, and From/To bound the step's window (zero when not recorded).
	At, From, To time.Time
}

// Factor is how many times the sample is away from the median (>= 1).
func (o Outlier) Factor() float64 {
	if o.Value >= o.Median {
		return o.Value / o.Median
	}
	return o.Median / o.Value
}

// String describes the outlier in one line: "iptables sync services=5000 kind=partial:
// sample 1 of 5 = 211 s, 390x the median 540 ms, step partial-sync-5k at 14:02:11".
func (o Outlier) String() string {
	s := fmt.Sprintf("%s %s %s: sample %d of %d = %s, %s the median %s", o.Backend, o.Name, paramString(o.Params, " "),
		o.Index+1, o.N, formatValue(o.Value, o.Unit), ratioString(o.Factor()), formatValue(o.Median, o.Unit))
	if o.Step != "" {
		s += ", step " + o.Step
	}
	return s + o.When()
}

// When renders the sample's time (" at 14:02:11 UTC"), or its step's window
// (" between 14:01:30 and 14:05:43 UTC"), or "" when neither was recorded.
func (o Outlier) When() string {
	const layout = "2006-01-02 15:04:05"
	switch {
	case !o.At.IsZero():
		return " at " + o.At.UTC().Format(layout) + " UTC"
	case !o.From.IsZero() && !o.To.IsZero():
		return " between " + o.From.UTC().Format(layout) + " and " + o.To.UTC().Format("15:04:05") + " UTC"
	}
	return ""
}

// Outliers returns every sample of r more than OutlierFactor times away from its
// measurement's median (above it; or below it for rates, whose bad tail is low), in
// decreasing factor. Series (Measure.Series: distributions, per-rule adds) are left
// out: their samples are per-endpoint counts and a growing series, not repeats of one
// figure.
func Outliers(r *Results) []Outlier {
	var out []Outlier
	series := seriesNames()
	for _, p := range points(r) {
		m := p.m
		if series[m.Name] || !m.Measured() || len(m.Samples) < minOutlierSamples {
			continue
		}
		med := m.Summary.P50
		if med <= 0 {
			continue
		}
		low := betterOf(r, m) == HigherIsBetter
		for i, v := range m.Samples {
			if !(v > OutlierFactor*med || (low && v*OutlierFactor < med)) {
				continue
			}
			o := Outlier{Backend: p.backend, Name: m.Name, Params: m.Params, Unit: m.Unit, Index: i, N: len(m.Samples),
				Value: v, Median: med, Step: m.Step, From: m.Start, To: m.End}
			if at, ok := m.SampleTime(i); ok {
				o.At = at
			}
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, func(a, b Outlier) int { return cmp.Compare(b.Factor(), a.Factor()) })
	return out
}

// outlierGroup is the outliers of one measurement.
type outlierGroup struct {
	first  Outlier // the worst: largest factor
	count  int
	excess float64 // sum of |value - median|, in the unit
}

// String describes the group in one line: the worst sample as Outlier.String, and how
// many others of the measurement stand out too.
func (g outlierGroup) String() string {
	s := g.first.String()
	if g.count > 1 {
		s += fmt.Sprintf(" (worst of %d such samples out of %d)", g.count, g.first.N)
	}
	return s
}

// groupOutliers gathers outs by measurement, the groups that cost the most time first
// (a 210 s sync before a 100 ms lookup), then the others by their worst factor.
func groupOutliers(outs []Outlier) []outlierGroup {
	var gs []outlierGroup
	idx := map[string]int{}
	for _, o := range outs {
		k := o.Backend + "\x00" + o.Name + "\x00" + paramString(o.Params, " ")
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, outlierGroup{first: o})
		}
		g := &gs[i]
		g.count++
		g.excess += math.Abs(o.Value - o.Median)
		if o.Factor() > g.first.Factor() {
			g.first = o
		}
	}
	slices.SortStableFunc(gs, func(a, b outlierGroup) int {
		at, bt := a.first.Unit == UnitSeconds, b.first.Unit == UnitSeconds
		switch {
		case at && bt:
			return cmp.Compare(b.excess, a.excess)
		case at != bt:
			if at {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.first.Factor(), a.first.Factor())
	})
	return gs
}

// answeredOutliers keeps the outliers of the measurements the answers table reads.
func answeredOutliers(outs []Outlier) []Outlier {
	rows := questions()
	var keep []Outlier
	for _, o := range outs {
		m := &Measurement{Name: o.Name, Params: o.Params, Unit: o.Unit, Samples: []float64{1}}
		if slices.ContainsFunc(rows, func(row questionRow) bool { return row.reads(m) }) {
			keep = append(keep, o)
		}
	}
	return keep
}

// seriesNames is the set of the measurement names that are series (Measure.Series).
func seriesNames() map[string]bool {
	out := map[string]bool{}
	for _, m := range Measures() {
		if m.Series {
			out[m.Name] = true
		}
	}
	return out
}

// tailText renders a summary's tail for a table cell: "p99 1.2 s, max 211 s" (one
// figure when p99 and max print the same), or "" for a single sample.
func tailText(s stats.Summary, unit string) string {
	if s.N < 2 || s.Min == s.Max {
		return "" // one sample, or all alike: no tail
	}
	p99, mx := formatValue(s.P99, unit), formatValue(s.Max, unit)
	if p99 == mx {
		return "p99 = max " + mx
	}
	return "p99 " + p99 + ", max " + mx
}

// countLine says how many outliers there are beyond those listed: "and 12 more".
func countLine(shown, total int) string {
	if total <= shown {
		return ""
	}
	return fmt.Sprintf("and %d more measurements with such samples", total-shown)
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}
