package reports

import (
	"bytes"
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
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Figure is one plot drawn from a Results, ready to be saved or inlined.
type Figure struct {
	// Name is the file name without extension, e.g. "sync" or "lookup-iptables".
	Name string
	// Title is the plot's title, also used as the caption in report.html.
	Title string
	// Plot is the gonum plot.
	Plot *plot.Plot
}

// Figure size in the files and in report.html.
const (
	figureWidth  = 18 * vg.Centimeter
	figureHeight = 11 * vg.Centimeter
)

// Figures draws every plot whose data exists in r, in a fixed order: sync time, lookup
// cost (one per backend), programming latency CDF, distribution (one per backend and
// point), per-rule add latency, throughput. A measurement that is absent gives no plot.
func Figures(r *Results) ([]Figure, error) {
	d := newDrawer(r)
	var figs []Figure
	for _, f := range []func() ([]Figure, error){d.sync, d.lookup, d.programmingLatency, d.distribution, d.perRule, d.throughput} {
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
			path := filepath.Join(out, f.Name+"."+format)
			if err := writeFile(path, data); err != nil {
				return files, err
			}
			files = append(files, path)
		}
	}
	return files, nil
}

// render draws f in format ("png" or "svg").
func render(f Figure, format string) ([]byte, error) {
	wt, err := f.Plot.WriterTo(figureWidth, figureHeight, format)
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", f.Name, err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plot %s: %w", f.Name, err)
	}
	return buf.Bytes(), nil
}

// drawer keeps the colours consistent: a backend has the same colour in every plot.
type drawer struct {
	r        *Results
	backends []string
}

func newDrawer(r *Results) *drawer { return &drawer{r: r, backends: backends(r)} }

func (d *drawer) color(backend string) color.Color {
	return plotutil.Color(max(slices.Index(d.backends, backend), 0))
}

// newPlot makes a plot with title, axis labels, a grid and the legend top-left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// series is one line: points sorted by x, with optional error bars (low, high offsets).
type series struct {
	label string
	xys   plotter.XYs
	errs  plotter.YErrors
}

// add draws s as a line with points in the backend's colour and the style number's dashes
// and glyph, with error bars when s has them.
func (d *drawer) add(p *plot.Plot, s series, backend string, style int) error {
	if len(s.xys) == 0 {
		return nil
	}
	l, pts, err := plotter.NewLinePoints(s.xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", s.label, err)
	}
	c := d.color(backend)
	l.Color = c
	l.Width = vg.Points(1.5)
	l.Dashes = plotutil.Dashes(style)
	pts.Color = c
	pts.Shape = plotutil.Shape(style)
	p.Add(l, pts)
	p.Legend.Add(s.label, l, pts)
	if len(s.errs) == len(s.xys) {
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{s.xys, s.errs})
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.label, err)
		}
		eb.Color = c
		p.Add(eb)
	}
	return nil
}

// bySize collects, for measurements named name that label accepts, the median against
// the "services" parameter, one series per label (and the backend owning each label).
// Error bars span the 95% CI of the mean, clamped to [min, max], which shows at a glance
// whether two lines are apart. Values <= 0 are dropped when positive is set (log axes).
func (d *drawer) bySize(name string, positive bool, label func(pt point) (string, bool)) (map[string]*series, []string, []string) {
	out := map[string]*series{}
	var labels []string
	owner := map[string]string{}
	for _, pt := range points(d.r) {
		if pt.m.Name != name || len(pt.m.Samples) == 0 {
			continue
		}
		x, ok := services(pt.m)
		if !ok {
			continue
		}
		l, ok := label(pt)
		if !ok {
			continue
		}
		s := pt.m.Summary
		if positive && s.P50 <= 0 {
			continue
		}
		if out[l] == nil {
			out[l] = &series{label: l}
			labels = append(labels, l)
			owner[l] = pt.backend
		}
		lo := math.Max(s.P50-math.Max(s.CI95Low, s.Min), 0)
		hi := math.Max(math.Min(s.CI95High, s.Max)-s.P50, 0)
		if positive && s.P50-lo <= 0 {
			lo = 0
		}
		out[l].xys = append(out[l].xys, plotter.XY{X: x, Y: s.P50})
		out[l].errs = append(out[l].errs, struct{ Low, High float64 }{Low: lo, High: hi})
	}
	for _, s := range out {
		sortSeries(s)
	}
	owners := make([]string, len(labels))
	for i, l := range labels {
		owners[i] = owner[l]
	}
	return out, labels, owners
}

// sortSeries sorts a series' points (and error bars) by x.
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

// sizeTicks puts ticks at the Services counts present, readable on a log axis
// (1k, 5k, 10k, 20k) instead of only the powers of ten.
func sizeTicks(all map[string]*series) plot.ConstantTicks {
	var xs []float64
	for _, s := range all {
		for _, xy := range s.xys {
			if !slices.Contains(xs, xy.X) {
				xs = append(xs, xy.X)
			}
		}
	}
	slices.Sort(xs)
	ticks := make(plot.ConstantTicks, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: formatValue(x, UnitCount)}
	}
	return ticks
}

// roomForLegend raises the top of the y axis so that a legend of entries lines in the top
// corner does not cover the data. Call it after the plotters are added.
func roomForLegend(p *plot.Plot, entries int, logScale bool) {
	f := min(0.5, 0.045*float64(entries)+0.03)
	lo, hi := p.Y.Min, p.Y.Max
	if logScale && lo > 0 && hi > lo {
		p.Y.Max = lo * math.Pow(hi/lo, 1/(1-f))
		return
	}
	if hi > lo {
		p.Y.Max = lo + (hi-lo)/(1-f)
	}
}

// numberTicks are gonum's default ticks labelled like the tables (12 k, 0.5, 3.2 k).
type numberTicks struct{ unit string }

// Ticks implements plot.Ticker.
func (t numberTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
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
		ticks = plot.DefaultTicks{}.Ticks(lo, hi)
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = formatValue(ticks[i].Value, t.unit)
			}
		}
	}
	return ticks
}

// logY puts the y axis on a log scale with 1-2-5 ticks labelled in unit.
func logY(p *plot.Plot, unit string) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{unit}
}

// sync: sync time against Services, per backend and kind, log-log.
func (d *drawer) sync() ([]Figure, error) {
	all, labels, owners := d.bySize(MeasureSync, true, func(pt point) (string, bool) {
		kind := cmpOr(pt.m.Params["kind"], "sync")
		return pt.backend + " " + kind, true
	})
	if len(labels) == 0 {
		return nil, nil
	}
	p := newPlot("Sync time vs number of Services (median, bars: 95% CI)", "Services (log scale)", "sync time (log scale)")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks(all)
	logY(p, UnitSeconds)
	for i, l := range labels {
		style := 0
		if strings.HasSuffix(l, " partial") {
			style = 1
		}
		if err := d.add(p, *all[l], owners[i], style); err != nil {
			return nil, err
		}
	}
	roomForLegend(p, len(labels), true)
	return []Figure{{Name: "sync", Title: "Sync time vs Services", Plot: p}}, nil
}

// lookup: connect latency against Services, one plot per backend, a line per position.
func (d *drawer) lookup() ([]Figure, error) {
	var figs []Figure
	positions := []string{"first", "middle", "last", "established"}
	for _, b := range d.backends {
		all, labels, _ := d.bySize(MeasureLookup, true, func(pt point) (string, bool) {
			if pt.backend != b {
				return "", false
			}
			pos := cmpOr(pt.m.Params["position"], "any")
			if pos == "established" {
				return "established connection (control)", true
			}
			return "position " + pos, true
		})
		if len(labels) == 0 {
			continue
		}
		p := newPlot("Lookup cost, "+b+": connect latency vs Services (median, bars: 95% CI)", "Services (log scale)", "connect latency (log scale)")
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = sizeTicks(all)
		logY(p, UnitSeconds)
		slices.SortStableFunc(labels, func(a, c string) int { return posRank(positions, a) - posRank(positions, c) })
		for i, l := range labels {
			s := *all[l]
			l, pts, err := plotter.NewLinePoints(s.xys)
			if err != nil {
				return nil, fmt.Errorf("plot lookup %s: %w", b, err)
			}
			c := plotutil.Color(i)
			l.Color, pts.Color = c, c
			l.Width = vg.Points(1.5)
			pts.Shape = plotutil.Shape(i)
			if strings.HasPrefix(s.label, "established") {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l, pts)
			p.Legend.Add(s.label, l, pts)
		}
		roomForLegend(p, len(labels), true)
		figs = append(figs, Figure{Name: "lookup-" + safeFileName(b), Title: "Lookup cost, " + b, Plot: p})
	}
	return figs, nil
}

func posRank(order []string, label string) int {
	for i, o := range order {
		if strings.Contains(label, o) {
			return i
		}
	}
	return len(order)
}

// programmingLatency: the CDF of programming latency, a line per backend (and size when
// there are several).
func (d *drawer) programmingLatency() ([]Figure, error) {
	var ps []point
	for _, pt := range points(d.r) {
		if pt.m.Name == MeasureProgrammingLatency && len(pt.m.Samples) > 0 {
			ps = append(ps, pt)
		}
	}
	if len(ps) == 0 {
		return nil, nil
	}
	p := newPlot("Programming latency: API change to first packet on the new rules (CDF)", "programming latency (s)", "fraction of changes programmed (≤ x)")
	p.Legend.Left = false
	// The legend sits in a band above 1, out of the curves' way.
	p.Y.Min, p.Y.Max = 0, 1+0.09*float64(len(ps))+0.05
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"}, {Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 0.9, Label: "0.9"}, {Value: 1, Label: "1"}}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pt := range ps {
		lo, hi = math.Min(lo, pt.m.Summary.Min), math.Max(hi, pt.m.Summary.Max)
	}
	if lo > 0 && hi/lo > 20 {
		// Backends a hundredfold apart: a linear axis would squash the fast one.
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{UnitSeconds}
		p.X.Label.Text = "programming latency (log scale)"
	}
	seen := map[string]int{}
	for _, pt := range ps {
		sorted := slices.Clone(pt.m.Samples)
		slices.Sort(sorted)
		step := max(1, len(sorted)/1000)
		var xys plotter.XYs
		for i := 0; i < len(sorted); i += step {
			xys = append(xys, plotter.XY{X: sorted[i], Y: float64(i+1) / float64(len(sorted))})
		}
		xys = append(xys, plotter.XY{X: sorted[len(sorted)-1], Y: 1})
		label := pt.backend
		if ps := paramString(pt.m.Params, " "); ps != "" {
			label += " " + ps
		}
		label += fmt.Sprintf(": p50 %s, p99 %s", formatValue(pt.m.Summary.P50, UnitSeconds), formatValue(pt.m.Summary.P99, UnitSeconds))
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot programming latency: %w", err)
		}
		l.Color = d.color(pt.backend)
		l.Width = vg.Points(1.5)
		l.StepStyle = plotter.PostStep
		l.Dashes = plotutil.Dashes(seen[pt.backend])
		seen[pt.backend]++
		p.Add(l)
		p.Legend.Add(label, l)
	}
	return []Figure{{Name: "programming-latency", Title: "Programming latency CDF", Plot: p}}, nil
}

// distribution: hits per endpoint as bars, the expected count as a line, the chi-square
// p-value in the title. One plot per backend and point.
func (d *drawer) distribution() ([]Figure, error) {
	var figs []Figure
	n := map[string]int{}
	for _, pt := range points(d.r) {
		if pt.m.Name != MeasureDistribution || len(pt.m.Samples) == 0 {
			continue
		}
		total := 0.0
		for _, v := range pt.m.Samples {
			total += v
		}
		shares := expectedShares(pt.m.Params["expected"], len(pt.m.Samples))
		title := fmt.Sprintf("Distribution, %s: %d endpoints, %s connections", pt.backend, len(pt.m.Samples), formatValue(total, UnitCount))
		if pv, ok := pt.m.Extra["p_value"]; ok {
			title += fmt.Sprintf("\nchi-square %.3g (df %g), p = %.3g", pt.m.Extra["chi2"], pt.m.Extra["df"], pv)
			if pv < 0.001 {
				title += ": NOT the expected shares"
			} else {
				title += ": fits the expected shares"
			}
		}
		p := newPlot(title, "endpoint (in endpoint order)", "connections received (count)")
		p.Legend.Left = false
		bars, err := plotter.NewBarChart(plotter.Values(pt.m.Samples), vg.Points(max(4, 300/float64(len(pt.m.Samples)))))
		if err != nil {
			return nil, fmt.Errorf("plot distribution %s: %w", pt.backend, err)
		}
		bars.Color = d.color(pt.backend)
		bars.LineStyle.Width = 0
		p.Add(bars)
		p.Legend.Add("observed", bars)
		var exp plotter.XYs
		for i, s := range shares {
			exp = append(exp, plotter.XY{X: float64(i) - 0.45, Y: s * total}, plotter.XY{X: float64(i) + 0.45, Y: s * total})
		}
		el, err := plotter.NewLine(exp)
		if err != nil {
			return nil, fmt.Errorf("plot distribution %s: %w", pt.backend, err)
		}
		el.Color = color.Black
		el.Width = vg.Points(1.5)
		el.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(el)
		p.Legend.Add("expected", el)
		p.Y.Min = 0
		roomForLegend(p, 4, false)
		p.Y.Tick.Marker = numberTicks{UnitCount}
		p.X.Tick.Marker = endpointTicks(len(pt.m.Samples))
		name := "distribution-" + safeFileName(pt.backend)
		if k := n[pt.backend]; k > 0 {
			name += "-" + strconv.Itoa(k+1)
		}
		n[pt.backend]++
		figs = append(figs, Figure{Name: name, Title: "Distribution, " + pt.backend, Plot: p})
	}
	return figs, nil
}

// endpointTicks labels endpoints 0..n-1 (every k-th when there are many).
func endpointTicks(n int) plot.ConstantTicks {
	step := max(1, n/20)
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
	var p *plot.Plot
	entries := 0
	for _, pt := range points(d.r) {
		if pt.m.Name != MeasurePerRule || len(pt.m.Samples) == 0 {
			continue
		}
		if p == nil {
			p = newPlot("Per-rule add latency vs table size (one command per rule)", "rules already in the table", "add latency")
		}
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
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(label, l)
		entries++
	}
	if p == nil {
		return nil, nil
	}
	p.Y.Tick.Marker = numberTicks{UnitSeconds}
	roomForLegend(p, entries, false)
	return []Figure{{Name: "perrule", Title: "Per-rule add latency vs table size", Plot: p}}, nil
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
