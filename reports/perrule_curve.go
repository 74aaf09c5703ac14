package reports

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// SeedClaim is one of the seeds' figures: programming Services one iptables call per
// rule took Seconds at Services (2017; /work/shared/examples/README.md).
type SeedClaim struct {
	Services int
	Seconds  float64
}

// SeedClaims: 11 minutes at 5,000 Services, 5 hours at 20,000.
var SeedClaims = []SeedClaim{{5000, 11 * 60}, {20000, 5 * 3600}}

// PerRuleSize is the per-rule curve at one table size.
type PerRuleSize struct {
	// Services in the table before the additions.
	Services int
	// Service is the median time to add one Service one iptables call per rule (its
	// syncs' wall time: chain creations, rules, jump checks), with its min and max.
	Service, ServiceMin, ServiceMax float64
	// Rules is the rules' share of it: the median time of one rule times the rules added
	// per Service.
	Rules float64
	// Program is the time to program Services from an empty table one call per rule: the
	// per-Service cost integrated from 0 (trapezoids between measured sizes);
	// ProgramRules the same for the rules alone.
	Program, ProgramRules float64
	// RestoreFull and RestorePartial are the median iptables-restore syncs of the same
	// table (0: not measured).
	RestoreFull, RestorePartial float64
}

// PerRuleCurve is the per-rule measurements of one backend, by size.
type PerRuleCurve struct {
	Backend string
	Sizes   []PerRuleSize
}

// PerRuleCurves reads the per-rule curves of r, one per backend that has
// perrule-service measurements at 0 Services and above. Without a measurement at 0 the
// integral starts at the smallest size with that size's cost (an underestimate).
func PerRuleCurves(r *Results) []PerRuleCurve {
	var out []PerRuleCurve
	for _, run := range r.Runs {
		bySize := map[int]*PerRuleSize{}
		perRule := map[int]float64{}
		rulesAdded := map[int]float64{}
		at := func(m *Measurement) (*PerRuleSize, bool) {
			n, err := strconv.Atoi(m.Params["services"])
			if err != nil || !m.Measured() {
				return nil, false
			}
			if bySize[n] == nil {
				bySize[n] = &PerRuleSize{Services: n}
			}
			return bySize[n], true
		}
		for i := range run.Measurements {
			m := &run.Measurements[i]
			switch m.Name {
			case MeasurePerRuleService:
				if s, ok := at(m); ok {
					s.Service, s.ServiceMin, s.ServiceMax = m.Summary.P50, m.Summary.Min, m.Summary.Max
					rulesAdded[s.Services] = m.Extra["rules_added"]
				}
			case MeasurePerRule:
				if s, ok := at(m); ok {
					perRule[s.Services] = m.Summary.P50
				}
			case MeasurePerRuleRestore:
				if s, ok := at(m); ok {
					if m.Params["kind"] == "full" {
						s.RestoreFull = m.Summary.P50
					} else {
						s.RestorePartial = m.Summary.P50
					}
				}
			}
		}
		var sizes []PerRuleSize
		for n, s := range bySize {
			if s.Service > 0 {
				s.Rules = perRule[n] * rulesAdded[n]
				sizes = append(sizes, *s)
			}
		}
		if len(sizes) == 0 {
			continue
		}
		slices.SortFunc(sizes, func(a, b PerRuleSize) int { return cmp.Compare(a.Services, b.Services) })
		integrate(sizes)
		out = append(out, PerRuleCurve{Backend: run.Backend, Sizes: sizes})
	}
	return out
}

// integrate fills Program and ProgramRules: the area under the per-Service cost from 0 to
// each size, the cost linear between measured sizes and flat before the first.
func integrate(sizes []PerRuleSize) {
	var prog, progRules float64
	prevN, prevC, prevR := 0.0, sizes[0].Service, sizes[0].Rules
	for i := range sizes {
		n := float64(sizes[i].Services)
		prog += (n - prevN) * (prevC + sizes[i].Service) / 2
		progRules += (n - prevN) * (prevR + sizes[i].Rules) / 2
		sizes[i].Program, sizes[i].ProgramRules = prog, progRules
		prevN, prevC, prevR = n, sizes[i].Service, sizes[i].Rules
	}
}

// programAt is the curve's Program (or ProgramRules) at exactly n Services, when n is one
// of its sizes.
func (c PerRuleCurve) programAt(n int, rulesOnly bool) (float64, bool) {
	for _, s := range c.Sizes {
		if s.Services == n {
			if rulesOnly {
				return s.ProgramRules, true
			}
			return s.Program, true
		}
	}
	return 0, false
}

// Verdict says plainly whether the seeds' claim holds on env: it holds when programming
// each claimed size one rule at a time takes at least half the claimed time here (the
// rules alone), and does not hold when it takes less. Sizes the curve lacks are named.
func (c PerRuleCurve) Verdict(env Environment) string {
	var parts, missing []string
	holds := true
	for _, sc := range SeedClaims {
		all, ok := c.programAt(sc.Services, false)
		rules, _ := c.programAt(sc.Services, true)
		if !ok {
			missing = append(missing, groupThousands(sc.Services))
			continue
		}
		if rules < sc.Seconds/2 {
			holds = false
		}
		parts = append(parts, fmt.Sprintf("%s Services in %s (%s of it the rules; the seeds: %s, %s)",
			groupThousands(sc.Services), longDuration(all), longDuration(rules), longDuration(sc.Seconds), ratioString(all/sc.Seconds)))
	}
	where := "kernel " + cmpOr(env.KernelRelease, "?")
	if f := strings.Fields(env.IPTablesVersion); len(f) >= 2 {
		where += ", iptables-legacy " + f[1] // the per-rule backend runs the legacy binary
	}
	if len(parts) == 0 {
		return fmt.Sprintf("The seeds' claim is not tested by this run (%s): no per-rule curve at %s Services.", where, strings.Join(missing, " or "))
	}
	verdict := "holds"
	if !holds {
		verdict = "does not hold"
	}
	s := fmt.Sprintf("The seeds' claim %s on this machine (%s): %s programs %s one iptables call per rule.", verdict, where, c.Backend, strings.Join(parts, " and "))
	if len(missing) > 0 {
		s += fmt.Sprintf(" Not measured: %s Services.", strings.Join(missing, ", "))
	}
	last := c.Sizes[len(c.Sizes)-1]
	if last.RestoreFull > 0 {
		s += fmt.Sprintf(" iptables-restore writes the whole table of %s Services in %s and changes one Service in %s.",
			groupThousands(last.Services), formatValue(last.RestoreFull, UnitSeconds), formatValue(last.RestorePartial, UnitSeconds))
	}
	return s
}

// longDuration prints seconds as "4.3 s", "12 min" or "21.6 h".
func longDuration(s float64) string {
	switch {
	case s >= 2*3600:
		return strconv.FormatFloat(math.Round(s/360)/10, 'f', -1, 64) + " h"
	case s >= 120:
		return strconv.FormatFloat(math.Round(s/60), 'f', -1, 64) + " min"
	}
	return formatValue(s, UnitSeconds)
}

// perRuleCurve draws, per backend with perrule-service measurements: left, the time to
// add one Service one call per rule against the table size, beside an iptables-restore
// partial sync of the same table; right, the time to program N Services that way
// (integrated) with the seeds' two points marked, beside a full iptables-restore. The
// note is the verdict on the seeds' claim.
func (d *drawer) perRuleCurve() ([]Figure, error) {
	var figs []Figure
	for _, c := range PerRuleCurves(d.r) {
		left := newPanel("Adding one Service at N Services", "Services in the table", "time (log scale)")
		right := newPanel("Programming N Services from an empty table", "Services", "time (log scale)")
		leg := newLegend()
		col := d.color(c.Backend)
		var svc, rules, prog, progRules, full, partial plotter.XYs
		var svcErr plotter.YErrors
		for _, s := range c.Sizes {
			x := float64(s.Services)
			svc = append(svc, plotter.XY{X: x, Y: s.Service})
			svcErr = append(svcErr, struct{ Low, High float64 }{s.Service - s.ServiceMin, s.ServiceMax - s.Service})
			if s.Rules > 0 {
				rules = append(rules, plotter.XY{X: x, Y: s.Rules})
			}
			if s.Program > 0 {
				prog = append(prog, plotter.XY{X: x, Y: s.Program})
			}
			if s.ProgramRules > 0 {
				progRules = append(progRules, plotter.XY{X: x, Y: s.ProgramRules})
			}
			if s.RestoreFull > 0 {
				full = append(full, plotter.XY{X: x, Y: s.RestoreFull})
			}
			if s.RestorePartial > 0 {
				partial = append(partial, plotter.XY{X: x, Y: s.RestorePartial})
			}
		}
		restoreCol := color.RGBA{0x59, 0xa1, 0x4f, 0xff}
		for _, l := range []struct {
			p      *plot.Plot
			s      series
			c      color.Color
			dashes []vg.Length
			shape  draw.GlyphDrawer
			legend bool
		}{
			{left, series{label: c.Backend + ": one call per rule (median, min-max)", xys: svc, errs: svcErr}, col, nil, draw.CircleGlyph{}, true},
			{left, series{label: c.Backend + ": the rules alone", xys: rules}, col, []vg.Length{vg.Points(4), vg.Points(3)}, draw.BoxGlyph{}, true},
			{left, series{label: "iptables-restore, partial sync (one Service)", xys: partial}, lighten(restoreCol, 0), []vg.Length{vg.Points(2), vg.Points(2)}, draw.TriangleGlyph{}, true},
			{right, series{label: "programming N Services one call per rule", xys: prog}, col, nil, draw.CircleGlyph{}, false},
			{right, series{label: "programming N Services, the rules alone", xys: progRules}, col, []vg.Length{vg.Points(4), vg.Points(3)}, draw.BoxGlyph{}, false},
			{right, series{label: "iptables-restore, full sync of N Services", xys: full}, restoreCol, []vg.Length{vg.Points(6), vg.Points(2)}, draw.TriangleGlyph{}, true},
		} {
			var lg *plot.Legend
			if l.legend {
				lg = &leg
			}
			if err := d.addLine(l.p, lg, l.s, l.c, l.dashes, l.shape); err != nil {
				return nil, err
			}
		}
		var seeds plotter.XYs
		for _, sc := range SeedClaims {
			seeds = append(seeds, plotter.XY{X: float64(sc.Services), Y: sc.Seconds})
		}
		sp, err := plotter.NewScatter(seeds)
		if err != nil {
			return nil, fmt.Errorf("plot seed claims: %w", err)
		}
		sp.Color = color.RGBA{0xd6, 0x27, 0x28, 0xff}
		sp.Shape = draw.CrossGlyph{}
		sp.Radius = vg.Points(6)
		right.Add(sp)
		leg.Add("the seeds' claim (2017): 11 min at 5k, 5 h at 20k", sp)
		for _, p := range []*plot.Plot{left, right} {
			logY(p, UnitSeconds)
			p.X.Min = 0
			p.X.Tick.Marker = numberTicks{UnitCount}
		}
		figs = append(figs, Figure{Name: "perrule-curve",
			Title:  "Adding Services one iptables call per rule, against the seeds' claim",
			Note:   c.Verdict(d.r.Environment) + " Left: median of the additions at each size; right: that cost integrated from an empty table.",
			Panels: []*plot.Plot{left, right}, Legend: leg})
	}
	return figs, nil
}
