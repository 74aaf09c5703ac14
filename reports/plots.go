package reports

import (
	"fmt"
	"image/color"
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

// Figures draws every chart whose data exists in r, in the order of report.html: the
// charts each measurement declares (Measures), in the order of Measures. A measurement
// that is absent gives no chart.
func Figures(r *Results) ([]Figure, error) {
	return figuresWith(r, backends(r))
}

// figuresWith draws r's figures with colours assigned in the order of palette (so that a
// backend keeps its colour in every section of a merged report).
func figuresWith(r *Results, palette []string) ([]Figure, error) {
	d := &drawer{r: r, palette: palette}
	var figs []Figure
	for _, m := range Measures() {
		for _, chart := range m.charts {
			fs, err := chart(d)
			if err != nil {
				return nil, err
			}
			figs = append(figs, fs...)
		}
	}
	return figs, nil
}

// sizeChart is the chart of one figure against Services: a line per backend, the median
// with bars from min to max.
type sizeChart struct {
	// measurement is the name drawn; match the parameters its measurements must hold.
	measurement string
	match       map[string]string
	// unit is the unit drawn: measurements of the name in another unit are left out.
	unit string
	// log puts the y axis on a log scale.
	log bool
	// file, title and y name the figure, its title and the y axis.
	file, title, y string
	// note is the figure's caption, from the points drawn.
	note func(d *drawer, ps []point) string
}

// draw is the sizeChart's chartFunc.
func (c sizeChart) draw(d *drawer) ([]Figure, error) {
	var ps []point
	for _, p := range d.pointsNamed(c.measurement) {
		if p.m.Unit == c.unit && hasParams(p.m, c.match) {
			ps = append(ps, p)
		}
	}
	p, leg, err := d.backendSeries(ps, "", c.y, c.unit, "p50", c.log)
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", c.file, err)
	}
	if p == nil {
		return nil, nil
	}
	return []Figure{{Name: c.file, Title: c.title, Note: c.note(d, ps), Panels: []*plot.Plot{p}, Legend: leg}}, nil
}

// fixedNote is a caption that does not depend on the points.
func fixedNote(s string) func(*drawer, []point) string {
	return func(*drawer, []point) string { return s }
}

// hasParams reports whether m holds every key and value of match.
func hasParams(m *Measurement, match map[string]string) bool {
	for k, v := range match {
		if m.Params[k] != v {
			return false
		}
	}
	return true
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

// cmpOr returns s, or def when s is empty.
func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
