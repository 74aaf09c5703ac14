package reports

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The programming family: the time from an API change to the rules that carry it, and
// what a churn saw while changes kept coming.
const (
	// MeasureProgrammingLatency is the time from an API change (EndpointSlice written) to
	// the end of the sync that carried it; Params "half" tells which half of the path
	// a churn timed ("sync", or ProgrammingHalfAPIToProbe). Unit "s".
	MeasureProgrammingLatency = "programming-latency"
	// MeasureProgrammingLatencyDataplane is the time from a change's trigger to the first
	// probe that observes it in the data plane. Unit "s".
	MeasureProgrammingLatencyDataplane = "programming-latency-dataplane"
	// MeasureChurnMisroutes counts probes that reached an endpoint removed by a sync that
	// ended before the probe started. Unit "count".
	MeasureChurnMisroutes = "churn-misroutes"
	// MeasureChurnFalseRefusals counts probes refused by a live Service with ready
	// endpoints. Unit "count".
	MeasureChurnFalseRefusals = "churn-false-refusals"
	// MeasureChurnProbeFailures counts other failed probes of live Services (timeouts,
	// resets): not refusals, reported beside them. Unit "count".
	MeasureChurnProbeFailures = "churn-probe-failures"
	// MeasureChurnRate is the change rate a churn step achieved; Extra holds the target.
	// Unit "1/s".
	MeasureChurnRate = "churn-rate"
	// MeasureChurnSync is the duration of every sync of the probing node during the churn;
	// Params "kind" is "full" or "partial". Unit "s".
	MeasureChurnSync = "churn-sync"
)

// Values of the programming latency's "half" parameter.
const (
	// ProgrammingHalfSync: from the API write to the end of the sync that carried it.
	ProgrammingHalfSync = "sync"
	// ProgrammingHalfAPIToProbe: from the API write to the first probe, from the node
	// that saw it, that followed the new rules.
	ProgrammingHalfAPIToProbe = "api-to-probe"
)

// programmingMeasures declares the programming family.
func programmingMeasures() []Measure {
	gated := func(name string, match map[string]string, title string) Metric {
		return Metric{Measurement: name, Match: match, Title: title, Unit: UnitSeconds,
			Better: LowerIsBetter, Gated: true, Test: TestLocation, MinSamples: 20, Statistics: []string{"p50", "p99"}}
	}
	count := func(name, title string) Measure {
		return Measure{Name: name, Metrics: []Metric{{Measurement: name, Title: title, Unit: UnitCount, Better: LowerIsBetter, Test: TestExact}}}
	}
	return []Measure{
		{
			Name: MeasureProgrammingLatency,
			Metrics: []Metric{
				gated(MeasureProgrammingLatency, nil, "programming latency"),
				gated(MeasureProgrammingLatency, map[string]string{"half": ProgrammingHalfSync}, "programming latency (to the end of the sync)"),
				gated(MeasureProgrammingLatency, map[string]string{"half": ProgrammingHalfAPIToProbe}, "programming latency (API write to the first probe from the node that saw it)"),
			},
			Legacy: []Metric{gated(MeasureProgrammingLatency, nil, "programming latency")},
			questions: []question{
				{Title: "programming latency p50", Stat: "p50"},
				{Title: "programming latency p99", Stat: "p99"},
			},
			charts: []chartFunc{(*drawer).programmingLatency},
		},
		{
			Name:    MeasureProgrammingLatencyDataplane,
			Metrics: []Metric{gated(MeasureProgrammingLatencyDataplane, nil, "programming latency (to the first probe that saw it)")},
		},
		count(MeasureChurnMisroutes, "churn: misroutes"),
		count(MeasureChurnFalseRefusals, "churn: false refusals"),
		count(MeasureChurnProbeFailures, "churn: other probe failures"),
		{Name: MeasureChurnRate, Metrics: []Metric{{Measurement: MeasureChurnRate, Title: "churn: changes per second achieved", Unit: UnitPerSecond, Better: HigherIsBetter}}},
		{Name: MeasureChurnSync, Metrics: []Metric{{Measurement: MeasureChurnSync, Title: "churn: sync durations", Unit: UnitSeconds, Better: LowerIsBetter}}},
	}
}

// programmingLatency: the CDF of programming latency, a line per backend (and size when
// there are several), p50 and p99 in the legend.
func (d *drawer) programmingLatency() ([]Figure, error) {
	ps := d.pointsNamed(MeasureProgrammingLatency)
	if len(ps) == 0 {
		return nil, nil
	}
	p := newPanel("", "programming latency", "fraction of changes programmed (≤ x)")
	p.Y.Min, p.Y.Max = 0, 1.02
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"}, {Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 0.9, Label: "0.9"}, {Value: 0.99, Label: "0.99"}}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pt := range ps {
		lo, hi = math.Min(lo, pt.m.Summary.Min), math.Max(hi, pt.m.Summary.Max)
	}
	if lo > 0 && hi/lo > 20 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{UnitSeconds}
		p.X.Label.Text = "programming latency (log scale)"
	} else {
		p.X.Tick.Marker = numberTicks{UnitSeconds}
	}
	leg := newLegend()
	seen := map[string]int{}
	multi := len(ps) > len(backendsOf(ps))
	for _, pt := range ps {
		sorted := slices.Clone(pt.m.Samples)
		slices.Sort(sorted)
		if p.X.Scale != nil && sorted[0] <= 0 {
			continue
		}
		step := max(1, len(sorted)/1000)
		var xys plotter.XYs
		for i := 0; i < len(sorted); i += step {
			xys = append(xys, plotter.XY{X: sorted[i], Y: float64(i+1) / float64(len(sorted))})
		}
		xys = append(xys, plotter.XY{X: sorted[len(sorted)-1], Y: 1})
		label := pt.backend
		if multi {
			label += " " + paramString(pt.m.Params, " ")
		}
		s := pt.m.Summary
		label += fmt.Sprintf(": p50 %s, p99 %s, max %s (n=%d)", formatValue(s.P50, UnitSeconds), formatValue(s.P99, UnitSeconds), formatValue(s.Max, UnitSeconds), s.N)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot programming latency: %w", err)
		}
		l.Color = d.color(pt.backend)
		l.Width = vg.Points(1.6)
		l.StepStyle = plotter.PostStep
		l.Dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(2)}, {vg.Points(2), vg.Points(2)}}[seen[pt.backend]%3]
		seen[pt.backend]++
		p.Add(l)
		leg.Add(label, l)
	}
	return []Figure{{
		Name:   "programming-latency",
		Title:  "Programming latency: from an API change to the rules in the kernel",
		Note:   "Cumulative share of changes programmed within x; a curve further left is better. The legend gives p50, p99 and max.",
		Panels: []*plot.Plot{p}, Legend: leg,
	}}, nil
}
