package reports

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"kpbench.dev/kpbench/reports/stats"
)

// ControlDrift is the change of one control measurement (a figure of the machine itself,
// such as the established-connection latency beside every lookup) between two runs.
type ControlDrift struct {
	// Metric names the control.
	Metric string
	// Factor is NEW's median over OLD's.
	Factor float64
	// P is the Mann-Whitney p-value of the change (NaN with fewer than 4 samples a side).
	P float64
	// Significant is P < alpha: only then does compare normalise by Factor.
	Significant bool
}

// DriftEstimate is what the controls of two runs say of the machine between them.
//
// A regression of a figure whose declaration names a Control (lookups) is judged again
// with NEW's samples divided by its own control's factor (times; rates are multiplied),
// when that control slowed significantly and by no more than MaxDrift. A regression the
// normalised samples do not show is "drift" (explained, passes); one they still show
// stays a regression. This assumes the machine slows every packet path in proportion,
// a first-order model: the control and the measured path share the CPU, softirq and
// scheduler the drift comes from. Only regressions are normalised, only by a slower
// machine: a faster NEW machine is shown (DRIFT column), never used to turn a figure
// into a regression, since a connect is not a multiple of the control's request.
//
// A gated figure without a control of its own (syncs, throughput, programming latency)
// that regressed by no more than the worst significant control drift allows (new/old
// within Worst × (1+threshold)) is "DRIFT?": compare cannot tell code from machine, and
// says so instead of calling it a regression; it fails like "cannot judge" unless
// AllowUnjudged. A change larger than the drift explains stays a regression.
type DriftEstimate struct {
	// Controls are the controls found in both runs, in OLD's order.
	Controls []ControlDrift
	// Worst is the largest significant control factor above 1 (the machine slower in
	// NEW), 1 when no control slowed.
	Worst float64

	byName map[string]ControlDrift
}

// controlName returns the name of the control of the mcell c under declaration d: c's
// params with d.Control's replacing them (keys c lacks are not added, for files written
// before a key existed).
func controlName(c mcell, d Metric) (string, bool) {
	if len(d.Control) == 0 {
		return "", false
	}
	params := maps.Clone(c.m.Params)
	if params == nil {
		params = map[string]string{}
	}
	for k, v := range d.Control {
		switch _, ok := params[k]; {
		case ok && v == "":
			delete(params, k)
		case ok:
			params[k] = v
		}
	}
	m := Measurement{Name: c.m.Name, Params: params}
	if maps.Equal(params, c.m.Params) {
		return "", false
	}
	return metricName(c.backend, &m), true
}

// MaxDrift is the largest control factor compare takes for machine drift. A control that
// moved more (a third of its time, or three times it) measured a different machine or a
// changed measurement, not a busier one: nothing is normalised by it.
const MaxDrift = 2.0

// EstimateDrift measures the drift of every control that a declaration of old's cells
// names and both runs hold.
func EstimateDrift(oldRun, newRun *Results, decl func(mcell) Metric, alpha float64) DriftEstimate {
	oldOrder, oldBy := index(oldRun)
	_, newBy := index(newRun)
	e := DriftEstimate{Worst: 1, byName: map[string]ControlDrift{}}
	for _, c := range oldOrder {
		name, ok := controlName(c, decl(c))
		if !ok {
			continue
		}
		if _, done := e.byName[name]; done {
			continue
		}
		oc, ok1 := oldBy[name]
		nc, ok2 := newBy[name]
		if !ok1 || !ok2 || !oc.m.Measured() || !nc.m.Measured() || oc.m.Summary.P50 <= 0 {
			continue
		}
		cd := ControlDrift{Metric: name, Factor: nc.m.Summary.P50 / oc.m.Summary.P50, P: math.NaN()}
		if len(oc.m.Samples) >= 4 && len(nc.m.Samples) >= 4 {
			if _, p, err := stats.MannWhitneyU(oc.m.Samples, nc.m.Samples); err == nil {
				cd.P, cd.Significant = p, p < alpha
			}
		}
		if cd.Significant && cd.Factor > e.Worst && cd.Factor <= MaxDrift {
			e.Worst = cd.Factor
		}
		e.byName[name] = cd
		e.Controls = append(e.Controls, cd)
	}
	return e
}

// apply accounts for drift in the verdict of a location delta d (see DriftEstimate).
func (e DriftEstimate) apply(d *Delta, oc, nc mcell, opts CompareOptions, pool pooled) {
	lower, directed := direction(d)
	if !directed {
		return
	}
	if name, ok := controlName(oc, d.Decl); ok {
		cd, found := e.byName[name]
		if !found || !cd.Significant || cd.Factor <= 0 {
			return
		}
		d.Drift = cd.Factor
		if d.Verdict != VerdictRegression || cd.Factor <= 1 || cd.Factor > MaxDrift {
			return
		}
		norm := make([]float64, len(nc.m.Samples))
		for i, v := range nc.m.Samples {
			if lower {
				norm[i] = v / cd.Factor
			} else {
				norm[i] = v * cd.Factor
			}
		}
		nd := *d
		ns := stats.Summarize(norm)
		nd.New, nd.Why = &ns, ""
		if nd.Old.P50 != 0 {
			nd.Change = (ns.P50 - nd.Old.P50) / math.Abs(nd.Old.P50)
		}
		judgeLocation(&nd, oc.m.Samples, norm, opts, pool)
		if nd.Verdict == VerdictRegression {
			d.Why += fmt.Sprintf("; still %+.1f%% after normalising by the machine drift ×%.2f of %s", 100*nd.Change, cd.Factor, name)
			return
		}
		d.Verdict = VerdictDrift
		d.Why = fmt.Sprintf("%+.1f%%, but the machine drift ×%.2f of %s explains it: normalised change %+.1f%%", 100*d.Change, cd.Factor, name, 100*nd.Change)
		return
	}
	if d.Verdict != VerdictRegression || e.Worst <= 1 {
		return
	}
	ratio := 1 + d.Change // new/old of the medians
	if !lower && ratio > 0 {
		ratio = 1 / ratio
	}
	if ratio <= e.Worst*(1+opts.Threshold) {
		d.Verdict = VerdictUnexplainedDrift
		d.Why = fmt.Sprintf("%+.1f%%, but the machine itself measured up to ×%.2f slower in NEW (%s), and this figure has no control of its own to tell code from machine; rerun both on a quiet machine",
			100*d.Change, e.Worst, e.worstName())
	}
}

// worstName names the control with the worst drift.
func (e DriftEstimate) worstName() string {
	i := slices.IndexFunc(e.Controls, func(c ControlDrift) bool { return c.Significant && c.Factor == e.Worst })
	if i < 0 {
		return ""
	}
	return e.Controls[i].Metric
}

// summary is one line on the drift for the comparison's output.
func (e DriftEstimate) summary() string {
	if len(e.Controls) == 0 {
		return "machine drift: no control measured in both runs; figures are compared as measured"
	}
	lo, hi, sig := math.Inf(1), math.Inf(-1), 0
	for _, c := range e.Controls {
		lo, hi = min(lo, c.Factor), max(hi, c.Factor)
		if c.Significant {
			sig++
		}
	}
	return fmt.Sprintf("machine drift: %d control(s) moved ×%.2f..×%.2f NEW/OLD, %d significantly; regressions of figures with a control are normalised by a control that slowed by up to ×%g, gated figures without one that changed within ×%.2f(1+threshold) are \"DRIFT?\"",
		len(e.Controls), lo, hi, sig, MaxDrift, e.Worst)
}
