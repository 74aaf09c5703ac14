package reports

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// MeasureDistribution is how many connections each endpoint received; Samples[i] is the
// count of endpoint i (in endpoint order), Params "expected" the expected shares
// ("uniform" or comma-separated weights), Extra holds chi2, df, p_value and share_<i>.
// Unit "count".
const MeasureDistribution = "distribution"

// distributionMeasures declares the distribution.
func distributionMeasures() []Measure {
	fit := Metric{Measurement: MeasureDistribution, Title: "connections per endpoint", Unit: UnitCount, Gated: true, Test: TestFit, MinSamples: 2}
	return []Measure{{
		Name:        MeasureDistribution,
		Metrics:     []Metric{fit},
		Legacy:      []Metric{fit},
		Series:      true,
		BenchUnit:   "hits",
		SampleParam: "endpoint",
		charts:      []chartFunc{(*drawer).distribution},
	}}
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
