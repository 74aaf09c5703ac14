package reports

import (
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PublishedLookup is a first-packet latency published by others, drawn beside ours
// (never mixed into our figures): the percentiles of one mode at one size.
type PublishedLookup struct {
	Backend  string
	Services int
	// P50, P90 and P99 in seconds.
	P50, P90, P99 float64
}

// KEP3866Source names where KEP3866Lookups come from.
const KEP3866Source = `kubernetes.io blog "NFTables mode for kube-proxy" (2025-02-28), chart of KEP-3866`

// KEP3866Lookups are the first-packet latencies of the KEP-3866 chart (read off its
// bars, ±4 µs): iptables grows with the Services, nftables is flat (~13/21/37 µs at all
// three sizes). Other hardware and another method than ours: shapes compare, absolute
// values do not.
var KEP3866Lookups = []PublishedLookup{
	{"iptables", 5000, 49e-6, 120e-6, 156e-6},
	{"iptables", 10000, 61e-6, 187e-6, 262e-6},
	{"iptables", 30000, 274e-6, 490e-6, 715e-6},
	{"nftables", 5000, 13e-6, 21e-6, 37e-6},
	{"nftables", 10000, 13e-6, 21e-6, 37e-6},
	{"nftables", 30000, 13e-6, 21e-6, 37e-6},
}

// percentile shades: how much of the backend's colour is mixed with white for p50,
// p90 and p99 (darkest to lightest).
var percentileShades = [3]float64{0, 0.4, 0.72}

// pbar is one backend at one size: three overlaid bars from zero to p99, p90 and p50.
type pbar struct {
	x             float64   // category (size index)
	offset        vg.Length // place within the category
	p50, p90, p99 float64
}

// percentileBars draws a backend's pbars in its colour, p99 lightest behind p50 darkest.
type percentileBars struct {
	bars  []pbar
	width vg.Length
	color color.RGBA
}

// Plot implements plot.Plotter.
func (b *percentileBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, br := range b.bars {
		x := trX(br.x) + br.offset
		for k, v := range []float64{br.p99, br.p90, br.p50} {
			if v <= 0 || math.IsNaN(v) {
				continue
			}
			pts := []vg.Point{{X: x - b.width/2, Y: trY(0)}, {X: x - b.width/2, Y: trY(v)}, {X: x + b.width/2, Y: trY(v)}, {X: x + b.width/2, Y: trY(0)}}
			c.FillPolygon(lighten(b.color, percentileShades[2-k]), c.ClipPolygonY(pts))
		}
	}
}

// DataRange implements plot.DataRanger.
func (b *percentileBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, br := range b.bars {
		xmin, xmax = math.Min(xmin, br.x), math.Max(xmax, br.x)
		ymax = math.Max(ymax, br.p99)
	}
	return xmin, xmax, 0, ymax
}

// swatch is a legend thumbnail: a filled square.
type swatch struct{ color color.Color }

// Thumbnail implements plot.Thumbnailer.
func (s swatch) Thumbnail(c *draw.Canvas) {
	h := c.Max.Y - c.Min.Y
	x := c.Min.X + (c.Max.X-c.Min.X-h)/2
	c.FillPolygon(s.color, []vg.Point{{X: x, Y: c.Min.Y}, {X: x, Y: c.Max.Y}, {X: x + h, Y: c.Max.Y}, {X: x + h, Y: c.Min.Y}})
}

// lookupPercentiles is one backend's pooled first-packet latencies at one size.
type lookupPercentiles struct {
	backend       string
	services      int
	p50, p90, p99 float64
	n             int
}

// firstPackets pools the lookups of the first, middle and last Service of each
// backend and size (the established control left out): a Service anywhere in the table.
func (d *drawer) firstPackets() []lookupPercentiles {
	pooled := map[string]map[int][]float64{}
	var order []string
	for _, p := range d.pointsNamed(MeasureLookup) {
		if p.m.Params["position"] == "established" {
			continue
		}
		n, ok := services(p.m)
		if !ok {
			continue
		}
		if pooled[p.backend] == nil {
			pooled[p.backend] = map[int][]float64{}
			order = append(order, p.backend)
		}
		pooled[p.backend][int(n)] = append(pooled[p.backend][int(n)], p.m.Samples...)
	}
	var out []lookupPercentiles
	for _, b := range d.ordered(order) {
		for n, samples := range pooled[b] {
			s := Summarize(samples)
			out = append(out, lookupPercentiles{b, n, s.P50, s.P90, s.P99, s.N})
		}
	}
	slices.SortStableFunc(out, func(a, b lookupPercentiles) int { return a.services - b.services })
	return out
}

// firstPacket: the KEP-3866-style chart: for each size, a bar per backend shaded at p50,
// p90 and p99, beside the published KEP-3866 figures (on real hardware only: an
// emulated kernel's packets are 25-50x slower, so the published panel is left out there).
func (d *drawer) firstPacket() ([]Figure, error) {
	ours := d.firstPackets()
	if len(ours) == 0 {
		return nil, nil
	}
	var pub []lookupPercentiles
	if d.r.Environment.Accelerator != "tcg" {
		for _, l := range KEP3866Lookups {
			pub = append(pub, lookupPercentiles{l.Backend, l.Services, l.P50, l.P90, l.P99, 0})
		}
	}
	npanels := 1
	if len(pub) > 0 {
		npanels = 2
	}
	ymax := 0.0
	for _, l := range append(slices.Clone(ours), pub...) {
		ymax = math.Max(ymax, l.p99)
	}
	leg := newLegend()
	var bs []string
	panel := func(title string, ls []lookupPercentiles) *plot.Plot {
		var sizes []int
		var pbs []string
		for _, l := range ls {
			if !slices.Contains(sizes, l.services) {
				sizes = append(sizes, l.services)
			}
			if !slices.Contains(pbs, l.backend) {
				pbs = append(pbs, l.backend)
			}
		}
		slices.Sort(sizes)
		p := newPanel(title, "Services", "")
		// Bars fill 80% of a category; the panel is about 13 cm wide over npanels.
		cat := 13 * vg.Centimeter / vg.Length(npanels*len(sizes))
		w := 0.8 * cat / vg.Length(len(pbs))
		for j, b := range pbs {
			pb := &percentileBars{width: w * 0.92, color: d.color(b)}
			for _, l := range ls {
				if l.backend != b {
					continue
				}
				off := (vg.Length(j) - vg.Length(len(pbs)-1)/2) * w
				pb.bars = append(pb.bars, pbar{x: float64(slices.Index(sizes, l.services)), offset: off, p50: l.p50, p90: l.p90, p99: l.p99})
			}
			p.Add(pb)
			if !slices.Contains(bs, b) {
				bs = append(bs, b)
			}
		}
		ticks := plot.ConstantTicks{}
		for i, n := range sizes {
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: formatValue(float64(n), UnitCount)})
		}
		p.X.Tick.Marker = ticks
		p.X.Min, p.X.Max = -0.5, float64(len(sizes))-0.5
		p.Y.Min, p.Y.Max = 0, ymax*1.05
		p.Y.Tick.Marker = numberTicks{UnitSeconds}
		return p
	}
	title := ""
	if len(pub) > 0 {
		title = "this run"
	}
	panels := []*plot.Plot{panel(title, ours)}
	if len(pub) == 0 {
		panels[0].Y.Label.Text = "first-packet latency"
	}
	note := "Bars: p50 (dark), p90 and p99 (light) of the TCP connect time from a pod through the Service rules, " +
		"pooled over the first, middle and last Service of the rule order. Lower is better."
	if d.r.Environment.Accelerator == "tcg" {
		note += " Emulated kernel (TCG): a packet's latency is mostly the emulator's, and the tails are the machine's load."
	}
	if len(pub) > 0 {
		panels = append(panels, panel("published, other hardware (KEP-3866)", pub))
		note += " Right: " + KEP3866Source + "; another machine and method, so compare the shapes, not the values."
	}
	for _, b := range d.ordered(bs) {
		leg.Add(b, swatch{d.color(b)})
	}
	for i, name := range []string{"p50", "p90", "p99"} {
		leg.Add(name, swatch{lighten(color.RGBA{0x40, 0x40, 0x40, 0xff}, percentileShades[i])})
	}
	return []Figure{{Name: "first-packet", Title: "First-packet latency: p50, p90 and p99 per backend and size", Note: note, Panels: panels, Legend: leg}}, nil
}
