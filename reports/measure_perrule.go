package reports

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The per-rule family: adding rules one iptables call at a time (scenarios/perrule.yaml
// on iptables-perrule), beside iptables-restore syncs of the same table.
const (
	// MeasurePerRule is the time to add one rule with one command; Samples[i] is the add
	// of the rule that found i rules already in the table (plus Params "base", the
	// table size before the first sample, default 0). Unit "s".
	MeasurePerRule = "perrule"
	// MeasurePerRuleService is the time to add one Service one iptables call per rule
	// (the wall time of the syncs that add it); Params "services", the generated
	// Services before it. Unit "s".
	MeasurePerRuleService = "perrule-service"
	// MeasurePerRuleRestore is a sync of the same table with one iptables-restore;
	// Params "kind" (full or partial) and "services". Unit "s".
	MeasurePerRuleRestore = "perrule-restore"
)

// perRuleMeasures declares the per-rule family.
func perRuleMeasures() []Measure {
	info := func(name string, match map[string]string, title string) Metric {
		return Metric{Measurement: name, Match: match, Title: title, Unit: UnitSeconds, Better: LowerIsBetter}
	}
	return []Measure{
		{
			Name:      MeasurePerRule,
			Metrics:   []Metric{info(MeasurePerRule, nil, "time to add one rule")},
			Series:    true,
			BenchName: "PerRule",
			charts:    []chartFunc{(*drawer).perRule},
		},
		{
			Name:    MeasurePerRuleService,
			Metrics: []Metric{info(MeasurePerRuleService, nil, "time to add one Service, one iptables call per rule")},
			charts:  []chartFunc{(*drawer).perRuleCurve},
		},
		{
			Name: MeasurePerRuleRestore,
			Metrics: []Metric{
				info(MeasurePerRuleRestore, map[string]string{"kind": "full"}, "full sync of the same table with iptables-restore"),
				info(MeasurePerRuleRestore, map[string]string{"kind": "partial"}, "partial sync (one Service) of the same table with iptables-restore"),
			},
		},
	}
}

// perRule: time to add one rule against the table size, a line per backend, long series
// reduced to at most 300 bucket medians.
func (d *drawer) perRule() ([]Figure, error) {
	ps := d.pointsNamed(MeasurePerRule)
	if len(ps) == 0 {
		return nil, nil
	}
	p := newPanel("", "rules already in the table", "time to add one rule")
	leg := newLegend()
	for _, pt := range ps {
		base, _ := strconv.ParseFloat(pt.m.Params["base"], 64)
		xys := bucketMedians(pt.m.Samples, base, 300)
		params := maps.Clone(pt.m.Params)
		if params["base"] == "0" {
			delete(params, "base")
		}
		label := pt.backend
		if ps := paramString(params, " "); ps != "" {
			label += " " + ps
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot perrule %s: %w", pt.backend, err)
		}
		l.Color = d.color(pt.backend)
		l.Width = vg.Points(1.2)
		p.Add(l)
		leg.Add(label, l)
	}
	p.Y.Min = 0
	p.Y.Tick.Marker = numberTicks{UnitSeconds}
	p.X.Tick.Marker = numberTicks{UnitCount}
	return []Figure{{Name: "perrule", Title: "Adding rules one command at a time: time per rule, by table size",
		Note:   "Median of buckets of consecutive adds (at most 300 points per line).",
		Panels: []*plot.Plot{p}, Legend: leg}}, nil
}

// bucketMedians reduces samples (sample i taken at table size base+i) to at most n points:
// the median of each bucket at its middle position.
func bucketMedians(samples []float64, base float64, n int) plotter.XYs {
	size := max(1, (len(samples)+n-1)/n)
	var xys plotter.XYs
	for lo := 0; lo < len(samples); lo += size {
		hi := min(lo+size, len(samples))
		b := slices.Clone(samples[lo:hi])
		slices.Sort(b)
		xys = append(xys, plotter.XY{X: base + float64(lo+hi-1)/2, Y: b[len(b)/2]})
	}
	return xys
}
