package reports

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Figures draws every chart whose data exists in r, in the order of report.html:
// first-packet latency (p50/p90/p99 per backend and size, beside the published KEP-3866
// figures on real hardware), full and partial sync against Services, first-packet
// latency by rule position, programming latency, throughput, kernel memory, rules,
// distribution, per-rule add latency. A measurement that is absent gives no chart.
func Figures(r *Results) ([]Figure, error) {
	return figuresWith(r, backends(r))
}

// figuresWith draws r's figures with colours assigned in the order of palette (so that a
// backend keeps its colour in every section of a merged report).
func figuresWith(r *Results, palette []string) ([]Figure, error) {
	d := &drawer{r: r, palette: palette}
	var figs []Figure
	for _, f := range []func() ([]Figure, error){
		d.firstPacket, d.syncs, d.lookupPositions, d.programmingLatency, d.throughput,
		d.kernelMemory, d.rules, d.distribution, d.perRule, d.perRuleCurve,
	} {
		fs, err := f()
		if err != nil {
			return nil, err
		}
		figs = append(figs, fs...)
	}
	return figs, nil
}

// WritePlots saves every figure of r as DIR/plots/<name>.png and .svg and returns the
// files written.
func WritePlots(dir string, r *Results) ([]string, error) {
	figs, err := Figures(r)
	if err != nil {
		return nil, err
	}
	return writeFigures(dir, "", figs)
}

// writeFigures saves figs as DIR/plots/<prefix><name>.png and .svg.
func writeFigures(dir, prefix string, figs []Figure) ([]string, error) {
	out := filepath.Join(dir, "plots")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("write plots: %w", err)
	}
	var files []string
	for _, f := range figs {
		for _, format := range []string{"png", "svg"} {
			data, err := render(f, format)
			if err != nil {
				return files, err
			}
			path := filepath.Join(out, prefix+f.Name+"."+format)
			if err := writeFile(path, data); err != nil {
				return files, err
			}
			files = append(files, path)
		}
	}
	return files, nil
}

// drawer draws the figures of one Results, a backend in the same colour everywhere.
type drawer struct {
	r       *Results
	palette []string
}

// backendColors is the Tableau 10 palette: distinct, and readable in print.
var backendColors = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff}, {0x59, 0xa1, 0x4f, 0xff},
	{0xb0, 0x7a, 0xa1, 0xff}, {0x76, 0xb7, 0xb2, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	{0xff, 0x9d, 0xa7, 0xff}, {0xba, 0xb0, 0xac, 0xff},
}

// color is backend's colour: its place in the palette, or after it for a backend the
// palette lacks (the published figures' "iptables" in a run without iptables).
func (d *drawer) color(backend string) color.RGBA {
	i := slices.Index(d.palette, backend)
	if i < 0 {
		i = len(d.palette) + int(hashString(backend)%3)
	}
	return backendColors[i%len(backendColors)]
}

func hashString(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// lighten mixes c with white: f = 0 keeps c, f = 1 is white.
func lighten(c color.RGBA, f float64) color.RGBA {
	mix := func(v uint8) uint8 { return uint8(float64(v) + (255-float64(v))*f) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 0xff}
}

func plotterGrid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 0xe4}
	g.Horizontal.Color = color.Gray{Y: 0xe4}
	return g
}

// pointsNamed returns r's measurements called name that have samples, in file order.
func (d *drawer) pointsNamed(names ...string) []point {
	var ps []point
	for _, p := range points(d.r) {
		if slices.Contains(names, p.m.Name) && p.m.Measured() {
			ps = append(ps, p)
		}
	}
	return ps
}

// series is one line of a chart: points sorted by x, with optional bars.
type series struct {
	label   string
	backend string
	xys     plotter.XYs
	errs    plotter.YErrors
}

// addLine draws s in its backend's colour with the given dashes and glyph, with its
// bars when it has them, and adds it to the legend.
func (d *drawer) addLine(p *plot.Plot, leg *plot.Legend, s series, c color.Color, dashes []vg.Length, shape draw.GlyphDrawer) error {
	if len(s.xys) == 0 {
		return nil
	}
	sortSeries(&s)
	l, pts, err := plotter.NewLinePoints(s.xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", s.label, err)
	}
	l.Color = c
	l.Width = vg.Points(1.6)
	l.Dashes = dashes
	pts.Color = c
	pts.Shape = shape
	pts.Radius = vg.Points(2.6)
	p.Add(l, pts)
	if leg != nil {
		leg.Add(s.label, l, pts)
	}
	if len(s.errs) == len(s.xys) {
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{s.xys, s.errs})
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.label, err)
		}
		eb.Color = c
		eb.LineStyle.Width = vg.Points(1)
		eb.CapWidth = vg.Points(5)
		p.Add(eb)
	}
	return nil
}

// sortSeries sorts a series' points (and bars) by x.
func sortSeries(s *series) {
	idx := make([]int, len(s.xys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case s.xys[a].X < s.xys[b].X:
			return -1
		case s.xys[a].X > s.xys[b].X:
			return 1
		}
		return 0
	})
	xys := make(plotter.XYs, len(idx))
	var errs plotter.YErrors
	if len(s.errs) == len(idx) {
		errs = make(plotter.YErrors, len(idx))
	}
	for i, j := range idx {
		xys[i] = s.xys[j]
		if errs != nil {
			errs[i] = s.errs[j]
		}
	}
	s.xys, s.errs = xys, errs
}

// bySize collects, for the measurements ps, one series per key: the statistic against
// the "services" parameter, with bars from min to max when withRange is set. Points
// whose value is not positive are dropped when positive is set (log axes).
func bySize(ps []point, key func(point) string, stat string, withRange, positive bool) (map[string]*series, []string) {
	out := map[string]*series{}
	var keys []string
	for _, pt := range ps {
		x, ok := services(pt.m)
		if !ok {
			continue
		}
		k := key(pt)
		if k == "" {
			continue
		}
		s := pt.m.Summary
		y := statOf(s, stat)
		if positive && (y <= 0 || s.Min <= 0) {
			continue
		}
		if out[k] == nil {
			out[k] = &series{label: k, backend: pt.backend}
			keys = append(keys, k)
		}
		out[k].xys = append(out[k].xys, plotter.XY{X: x, Y: y})
		if withRange {
			out[k].errs = append(out[k].errs, struct{ Low, High float64 }{Low: y - s.Min, High: s.Max - y})
		}
	}
	return out, keys
}

// sizesOf returns the x values of every series, sorted.
func sizesOf(all map[string]*series) []float64 {
	var xs []float64
	for _, s := range all {
		for _, xy := range s.xys {
			if !slices.Contains(xs, xy.X) {
				xs = append(xs, xy.X)
			}
		}
	}
	slices.Sort(xs)
	return xs
}

// servicesAxis puts Services on a log x axis with a tick at every size present, and room
// on both sides so that the first and last tick labels are not clipped.
func servicesAxis(p *plot.Plot, xs []float64) {
	p.X.Label.Text = "Services (log scale)"
	if len(xs) == 0 {
		return
	}
	p.X.Scale = plot.LogScale{}
	ticks := make(plot.ConstantTicks, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: strings.ReplaceAll(formatValue(x, UnitCount), " ", "")}
	}
	p.X.Tick.Marker = ticks
	lo, hi := xs[0], xs[len(xs)-1]
	if hi == lo {
		lo, hi = lo/2, hi*2
	}
	pad := math.Pow(hi/lo, 0.06)
	p.X.Min, p.X.Max = lo/pad, hi*pad
}

// numberTicks are gonum's default ticks labelled like the tables (12 k, 0.5, 3.2 k).
type numberTicks struct{ unit string }

// Ticks implements plot.Ticker. Sizes in bytes are ticked at round numbers of the
// binary unit they print in (16 MiB, not 19.1 MiB).
func (t numberTicks) Ticks(lo, hi float64) []plot.Tick {
	scale := 1.0
	if t.unit == UnitBytes {
		for scale*1024 <= math.Max(math.Abs(lo), math.Abs(hi)) && scale < 1<<30 {
			scale *= 1024
		}
	}
	ticks := plot.DefaultTicks{}.Ticks(lo/scale, hi/scale)
	for i := range ticks {
		ticks[i].Value *= scale
		if ticks[i].Label != "" {
			ticks[i].Label = formatValue(ticks[i].Value, t.unit)
		}
	}
	return ticks
}

// logTicks marks a log axis at 1, 2 and 5 times the powers of ten (only the powers when
// the range spans more than two decades), labelled in unit, so that a narrow range (all
// lookups between 40 and 60 µs) still gets labels.
type logTicks struct{ unit string }

// Ticks implements plot.Ticker.
func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	mults := []float64{1, 2, 5}
	if hi/lo > 300 {
		mults = []float64{1}
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range mults {
			v := m * math.Pow(10, e)
			if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				ticks = append(ticks, plot.Tick{Value: v, Label: formatValue(v, t.unit)})
			}
		}
	}
	if len(ticks) < 2 {
		ticks = numberTicks(t).Ticks(lo, hi)
	}
	return ticks
}

// logY puts the y axis on a log scale with 1-2-5 ticks labelled in unit.
func logY(p *plot.Plot, unit string) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{unit}
}

// backendSeries draws one line per backend of the measurements ps against Services:
// the median, with bars from min to max. It returns nil when nothing is plottable.
func (d *drawer) backendSeries(ps []point, title, y, unit, stat string, log bool) (*plot.Plot, plot.Legend, error) {
	all, keys := bySize(ps, func(pt point) string { return pt.backend }, stat, true, log)
	leg := newLegend()
	if len(keys) == 0 {
		return nil, leg, nil
	}
	p := newPanel(title, "", y)
	servicesAxis(p, sizesOf(all))
	if log {
		logY(p, unit)
	} else {
		p.Y.Min = 0
		p.Y.Tick.Marker = numberTicks{unit}
	}
	bs := d.ordered(keys)
	for j, b := range bs {
		// Nudge each backend a little along the (log) x axis, so that bars at one size
		// do not hide each other.
		s := *all[b]
		s.xys = slices.Clone(s.xys)
		nudge := math.Exp(0.015 * (float64(j) - float64(len(bs)-1)/2))
		for i := range s.xys {
			s.xys[i].X *= nudge
		}
		if err := d.addLine(p, &leg, s, d.color(b), nil, draw.CircleGlyph{}); err != nil {
			return nil, leg, err
		}
	}
	if log {
		p.Y.Min, p.Y.Max = p.Y.Min/1.2, p.Y.Max*1.2 // the end points' glyphs inside the frame
	} else {
		p.Y.Max *= 1.08 // the top bar's cap off the frame
	}
	return p, leg, nil
}

// ordered returns keys (backend names) in palette order.
func (d *drawer) ordered(keys []string) []string {
	out := slices.Clone(keys)
	slices.SortStableFunc(out, func(a, b string) int {
		ia, ib := slices.Index(d.palette, a), slices.Index(d.palette, b)
		if ia < 0 {
			ia = len(d.palette)
		}
		if ib < 0 {
			ib = len(d.palette)
		}
		return ia - ib
	})
	return out
}

// tailNote is the note's sentence about whisker bars and sample counts.
func tailNote(ps []point) string {
	lo, hi := math.MaxInt, 0
	for _, p := range ps {
		lo, hi = min(lo, len(p.m.Samples)), max(hi, len(p.m.Samples))
	}
	n := strconv.Itoa(lo)
	if hi != lo {
		n = fmt.Sprintf("%d to %d", lo, hi)
	}
	return fmt.Sprintf("Line: median; bar: min to max (%s samples per point).", n)
}

// syncs: full and partial sync time against Services, one chart each, a line per backend.
func (d *drawer) syncs() ([]Figure, error) {
	var figs []Figure
	for _, k := range []struct{ kind, name, title string }{
		{"full", "sync-full", "Full sync: time to write every rule, by Services"},
		{"partial", "sync-partial", "Partial sync: time to program one changed Service, by Services in the table"},
	} {
		var ps []point
		for _, p := range d.pointsNamed(MeasureSync) {
			if p.m.Params["kind"] == k.kind {
				ps = append(ps, p)
			}
		}
		p, leg, err := d.backendSeries(ps, "", "sync time (log scale)", UnitSeconds, "p50", true)
		if err != nil || p == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		figs = append(figs, Figure{Name: k.name, Title: k.title, Note: tailNote(ps) + " Lower is better.", Panels: []*plot.Plot{p}, Legend: leg})
	}
	return figs, nil
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

// backendsOf returns the backends of ps in first-seen order.
func backendsOf(ps []point) []string {
	var bs []string
	for _, p := range ps {
		if !slices.Contains(bs, p.backend) {
			bs = append(bs, p.backend)
		}
	}
	return bs
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

// throughput draws rate against Services, one line per backend (median of the 100-ms
// slice rates, bars: min to max), one figure per kind: new connections and keep-alive
// requests (and the older single "throughput" measurement when a run has it).
func (d *drawer) throughput() ([]Figure, error) {
	kinds := []struct{ name, file, title, y string }{
		{MeasureThroughputConnections, "throughput-connections", "New connections per second through a Service, by Services in the table", "new connections per second"},
		{MeasureThroughputRequests, "throughput-requests", "Keep-alive requests per second through a Service, by Services in the table", "requests per second"},
		{MeasureThroughput, "throughput", "Throughput through a Service, by Services in the table", "connections per second"},
	}
	var figs []Figure
	for _, k := range kinds {
		ps := d.pointsNamed(k.name)
		p, leg, err := d.backendSeries(ps, "", k.y, UnitPerSecond, "p50", false)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", k.file, err)
		}
		if p == nil {
			continue
		}
		figs = append(figs, Figure{Name: k.file, Title: k.title,
			Note:   "Median rate of the 100-ms slices of the load; bar: min to max slice. Higher is better. Load generator, echo servers and datapath share this machine's cores.",
			Panels: []*plot.Plot{p}, Legend: leg})
	}
	return figs, nil
}

// kernelMemory: the kernel memory of the rules against Services, a line per backend.
func (d *drawer) kernelMemory() ([]Figure, error) {
	ps := d.pointsNamed(MeasureRulesMemory)
	p, leg, err := d.backendSeries(ps, "", "kernel memory (unreclaimable slab + vmalloc)", UnitBytes, "p50", false)
	if err != nil || p == nil {
		return nil, err
	}
	note := "Growth of unreclaimable slab plus vmalloc since a settled baseline, read host-wide after a full sync: one sample per size, noisy. Lower is better."
	for _, pt := range points(d.r) {
		if pt.m.Name == MeasureRulesMemory && len(pt.m.Samples) > 0 && !pt.m.Measured() {
			note += " Missing points came out negative (other processes freed memory meanwhile): not measured."
			break
		}
	}
	return []Figure{{Name: "kernel-memory", Title: "Kernel memory of the rules, by Services",
		Note:   note,
		Panels: []*plot.Plot{p}, Legend: leg}}, nil
}

// rules: the rules (and map elements) in the kernel against Services, a line per backend.
func (d *drawer) rules() ([]Figure, error) {
	var ps []point
	for _, p := range d.pointsNamed(MeasureRules) {
		if p.m.Unit == UnitCount {
			ps = append(ps, p)
		}
	}
	p, leg, err := d.backendSeries(ps, "", "rules, elements or servers", UnitCount, "p50", false)
	if err != nil || p == nil {
		return nil, err
	}
	return []Figure{{Name: "rules", Title: "Rules in the kernel after a full sync, by Services",
		Note:   "What each mode holds in the kernel for the same Services: iptables rules; nftables rules and map elements; IPVS virtual and real servers; the userspace proxy's portal rules.",
		Panels: []*plot.Plot{p}, Legend: leg}}, nil
}

// distribution: hits per endpoint as bars, the expected count as a dashed line, a panel
// per backend, one figure per point (size and parameters).
func (d *drawer) distribution() ([]Figure, error) {
	type group struct {
		key string
		ps  []point
	}
	var groups []*group
	for _, pt := range d.pointsNamed(MeasureDistribution) {
		key := paramString(pt.m.Params, " ")
		i := slices.IndexFunc(groups, func(g *group) bool { return g.key == key })
		if i < 0 {
			groups = append(groups, &group{key: key})
			i = len(groups) - 1
		}
		groups[i].ps = append(groups[i].ps, pt)
	}
	var figs []Figure
	for gi, g := range groups {
		var panels []*plot.Plot
		ymax := 0.0
		for _, pt := range g.ps {
			total := 0.0
			for _, v := range pt.m.Samples {
				total += v
				ymax = math.Max(ymax, v)
			}
			shares := expectedShares(pt.m.Params["expected"], len(pt.m.Samples))
			title := pt.backend
			if pv, ok := pt.m.Extra["p_value"]; ok {
				title += fmt.Sprintf(": p = %.2g", pv)
				if pv < 0.001 {
					title += ", NOT as expected"
				}
			}
			p := newPanel(title, "endpoint", "")
			bars, err := plotter.NewBarChart(plotter.Values(pt.m.Samples), vg.Points(max(3, 150/float64(len(pt.m.Samples)*len(g.ps)))))
			if err != nil {
				return nil, fmt.Errorf("plot distribution %s: %w", pt.backend, err)
			}
			bars.Color = d.color(pt.backend)
			bars.LineStyle.Width = 0
			p.Add(bars)
			var exp plotter.XYs
			for i, s := range shares {
				exp = append(exp, plotter.XY{X: float64(i) - 0.45, Y: s * total}, plotter.XY{X: float64(i) + 0.45, Y: s * total})
				ymax = math.Max(ymax, s*total)
			}
			el, err := plotter.NewLine(exp)
			if err != nil {
				return nil, fmt.Errorf("plot distribution %s: %w", pt.backend, err)
			}
			el.Color = color.Black
			el.Width = vg.Points(1.4)
			el.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			p.Add(el)
			p.X.Tick.Marker = endpointTicks(len(pt.m.Samples))
			p.X.Min, p.X.Max = -0.7, float64(len(pt.m.Samples))-0.3
			panels = append(panels, p)
		}
		for _, p := range panels {
			p.Y.Min, p.Y.Max = 0, ymax*1.08
			p.Y.Tick.Marker = numberTicks{UnitCount}
		}
		leg := newLegend()
		obs, _ := plotter.NewBarChart(plotter.Values{1}, vg.Points(6))
		obs.Color = color.Gray{Y: 0x80}
		obs.LineStyle.Width = 0
		leg.Add("observed (colour of the backend)", obs)
		el, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}})
		el.Color, el.Width, el.Dashes = color.Black, vg.Points(1.4), []vg.Length{vg.Points(4), vg.Points(2)}
		leg.Add("expected", el)
		pt0 := g.ps[0]
		total := 0.0
		for _, v := range pt0.m.Samples {
			total += v
		}
		name := "distribution"
		if gi > 0 {
			name += "-" + strconv.Itoa(gi+1)
		}
		where := ""
		if n, ok := services(pt0.m); ok {
			where = " at " + sizeLabel(strconv.Itoa(int(n)))
		}
		figs = append(figs, Figure{
			Name:  name,
			Title: fmt.Sprintf("Distribution over %d endpoints%s", len(pt0.m.Samples), where),
			Note: fmt.Sprintf("%s new connections per backend (%s); bars: connections each endpoint answered; dashed: the expected count. "+
				"p is the chi-square goodness of fit: small (< 0.001) means the selection does not follow the expected shares.",
				groupThousands(int(total)), g.key),
			Panels: panels, Legend: leg,
		})
	}
	return figs, nil
}

// endpointTicks labels endpoints 0..n-1 (every k-th when there are many).
func endpointTicks(n int) plot.ConstantTicks {
	step := max(1, n/10)
	var t plot.ConstantTicks
	for i := 0; i < n; i += step {
		t = append(t, plot.Tick{Value: float64(i), Label: strconv.Itoa(i)})
	}
	return t
}

// expectedShares parses the "expected" parameter: "uniform" (or empty) or comma-separated
// weights, normalised. A malformed or mismatched value falls back to uniform.
func expectedShares(spec string, n int) []float64 {
	shares := make([]float64, n)
	if spec != "" && spec != "uniform" {
		parts := strings.Split(spec, ",")
		sum := 0.0
		ok := len(parts) == n
		for i := 0; ok && i < n; i++ {
			v, err := strconv.ParseFloat(strings.TrimSpace(parts[i]), 64)
			if err != nil || v < 0 {
				ok = false
				break
			}
			shares[i] = v
			sum += v
		}
		if ok && sum > 0 {
			for i := range shares {
				shares[i] /= sum
			}
			return shares
		}
	}
	for i := range shares {
		shares[i] = 1 / float64(n)
	}
	return shares
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

// cmpOr returns s, or def when s is empty.
func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
