package reports

import (
	"image/color"
	"maps"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The lookup family: the connect latency through the Service rules, at a few positions
// of the rule order (lookup) or along all of it (first-packet), each with the
// established-connection control.
const (
	// MeasureLookup is the connect latency to a Service; Params "kind" is "connect", or
	// "established" for the control (a request over a connection kept open, which skips
	// the Service rules), "position" is "first", "middle", "last" (place in the rule
	// order) or "established", "services" the number of Services. Unit "s".
	MeasureLookup = "lookup"
	// MeasureFirstPacket is the connect latency to a generated Service at one rank of the
	// rule order; Params "rank" is its place in percent (0% the first Service, 100% the
	// last), "index" the Service's index, "kind" connect, or established for the control.
	// Unit "s".
	MeasureFirstPacket = "first-packet"
)

// lookupControl names the established-connection control beside every lookup position.
func lookupControl() map[string]string {
	return map[string]string{"kind": "established", "position": "established"}
}

// LookupControl returns the Control of lookup declarations: the established-connection
// control measured beside every position.
func LookupControl() map[string]string { return maps.Clone(lookupControl()) }

// lookupMeasures declares the lookup family.
func lookupMeasures() []Measure {
	connect := func(name string, match map[string]string, title string, control map[string]string) Metric {
		return Metric{Measurement: name, Match: match, Title: title, Unit: UnitSeconds, Better: LowerIsBetter,
			Gated: true, Test: TestLocation, MinSamples: 50, Statistics: []string{"p50", "p99"}, Control: control}
	}
	established := func(name string, match map[string]string) Metric {
		return Metric{Measurement: name, Match: match, Title: "established-connection latency (control)", Unit: UnitSeconds, Better: LowerIsBetter}
	}
	const pooling = "First-packet latency pools the first, middle and last Service of the rule order."
	notControl := map[string]string{"position": "established"}
	return []Measure{
		{
			Name: MeasureLookup,
			Metrics: []Metric{
				connect(MeasureLookup, map[string]string{"kind": "connect"}, "first-packet latency", lookupControl()),
				established(MeasureLookup, map[string]string{"kind": "established"}),
			},
			// Files of that time had no "kind".
			Legacy: []Metric{
				connect(MeasureLookup, nil, "first-packet latency", lookupControl()),
				established(MeasureLookup, map[string]string{"position": "established"}),
			},
			questions: []question{
				{Title: "first-packet latency p50", Exclude: notControl, Stat: "p50", Pooling: pooling},
				{Title: "first-packet latency p99", Exclude: notControl, Stat: "p99", Pooling: pooling},
			},
			charts: []chartFunc{(*drawer).firstPacket, (*drawer).lookupPositions},
		},
		{
			Name: MeasureFirstPacket,
			Metrics: []Metric{
				connect(MeasureFirstPacket, map[string]string{"kind": "connect"}, "first-packet latency by rank",
					map[string]string{"kind": "established", "rank": "", "index": ""}),
				established(MeasureFirstPacket, map[string]string{"kind": "established"}),
			},
		},
	}
}

// lookupPositions: first-packet latency against Services, a panel per backend, a line
// per position in the rule order and the established-connection control, on one y range.
func (d *drawer) lookupPositions() ([]Figure, error) {
	ps := d.pointsNamed(MeasureLookup)
	if len(ps) == 0 {
		return nil, nil
	}
	positions := []string{"first", "middle", "last", "established"}
	styles := map[string]struct {
		dashes []vg.Length
		shape  draw.GlyphDrawer
		label  string
	}{
		"first":       {nil, draw.CircleGlyph{}, "first Service in the rule order"},
		"middle":      {[]vg.Length{vg.Points(6), vg.Points(2)}, draw.SquareGlyph{}, "middle Service"},
		"last":        {[]vg.Length{vg.Points(2), vg.Points(2)}, draw.TriangleGlyph{}, "last Service"},
		"established": {[]vg.Length{vg.Points(1), vg.Points(3)}, draw.CrossGlyph{}, "established connection (control)"},
	}
	leg := newLegend()
	var panels []*plot.Plot
	lo, hi := math.Inf(1), math.Inf(-1)
	var xs []float64
	bs := d.ordered(backendsOf(ps))
	for _, b := range bs {
		all, keys := bySize(ps, func(pt point) string {
			if pt.backend != b {
				return ""
			}
			return cmpOr(pt.m.Params["position"], "any")
		}, "p50", false, true)
		if len(keys) == 0 {
			continue
		}
		p := newPanel(b, "", "")
		for _, pos := range positions {
			s, ok := all[pos]
			if !ok {
				continue
			}
			st := styles[pos]
			c := color.Color(d.color(b))
			if pos == "established" {
				c = color.Gray{Y: 0x70}
			}
			if err := d.addLine(p, nil, *s, c, st.dashes, st.shape); err != nil {
				return nil, err
			}
			for _, xy := range s.xys {
				lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
			}
		}
		for _, x := range sizesOf(all) {
			if !slices.Contains(xs, x) {
				xs = append(xs, x)
			}
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil, nil
	}
	slices.Sort(xs)
	// No y label: gonum's Align would shift the labelled panel's title; the note says
	// what the axis is.
	for _, p := range panels {
		servicesAxis(p, xs)
		p.X.Label.Text = "Services"
		logY(p, UnitSeconds)
		p.Y.Min, p.Y.Max = lo/1.3, hi*1.3
	}
	for _, pos := range positions {
		st := styles[pos]
		l := plotter.NewFunction(func(float64) float64 { return 0 })
		l.Color = color.Gray{Y: 0x30}
		if pos == "established" {
			l.Color = color.Gray{Y: 0x70}
		}
		l.Dashes = st.dashes
		l.Width = vg.Points(1.6)
		g := &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: l.Color, Shape: st.shape, Radius: vg.Points(2.6)}}
		leg.Add(st.label, l, g)
	}
	return []Figure{{
		Name:  "lookup-positions",
		Title: "First-packet latency by the Service's place in the rule order",
		Note: "Median TCP connect time from a pod through the Service rules to the first, middle and last Service; " +
			"the established connection skips the rules and shows the machine's own latency. Lower is better. " +
			"iptables walks its rules in order; nftables and IPVS look the Service up in a map or hash.",
		Panels: panels, Legend: leg,
	}}, nil
}
