package reports

import (
	"cmp"
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
	// Interleaved is true when both runs took the control interleaved with its figures
	// (Extra "interleaved"): compare then judges each figure's per-sample ratio to it.
	Interleaved bool

	oldS, newS []float64
}

// DriftEstimate is what the controls of two runs say of the machine between them.
//
// Controls taken interleaved with their figures (Extra "interleaved": lookups, syncs)
// are paired sample by sample (applyPaired): with no control moved beyond the
// threshold there is no drift to explain and the figure is judged as measured; when the
// machine changed, a regression is judged on the per-sample ratio figure/control, "drift"
// (passes) within the minimum effect, "DRIFT?" beyond it (the control is a first-order
// model of the machine).
//
// Controls of older files (taken after the figures): a regression of a figure whose
// declaration names a Control is judged again with NEW's samples divided by its own
// control's factor (times; rates are multiplied), when that control slowed
// significantly and by no more than MaxDrift. Only regressions are normalised, only by a
// slower machine: a faster NEW machine is shown (DRIFT column), never used to turn a
// figure into a regression.
//
// A gated figure without a control of its own (throughput, programming latency) that
// regressed by no more than the square of the worst significant control drift (new/old
// within Worst² × (1+threshold)) is "DRIFT?": compare cannot tell code from machine, and
// says so instead of calling it a regression; it fails only under Strict (then like
// "cannot judge", unless AllowUnjudged). A larger change stays a regression.
type DriftEstimate struct {
	// Controls are the controls found in both runs, in OLD's order.
	Controls []ControlDrift
	// Worst is the largest significant control factor above 1 (the machine slower in
	// NEW), 1 when no control slowed.
	Worst float64
	// Fastest is the smallest significant control factor below 1 (the machine faster in
	// NEW), 1 when no control sped up: a faster machine can hide a regression of a figure
	// without a control of its own.
	Fastest float64

	byName map[string]ControlDrift
	// ratioNoise is the variance of the log of the per-sample ratio figure/control,
	// pooled over the cells of one declaration and backend in both runs (the pooled
	// rule for ratios of figures with too few samples for a rank test).
	ratioNoise pooledNoise
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
	e := DriftEstimate{Worst: 1, Fastest: 1, byName: map[string]ControlDrift{}}
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
		cd := ControlDrift{Metric: name, Factor: nc.m.Summary.P50 / oc.m.Summary.P50, P: math.NaN(),
			Interleaved: oc.m.Extra[ExtraInterleaved] == 1 && nc.m.Extra[ExtraInterleaved] == 1,
			oldS:        oc.m.Samples, newS: nc.m.Samples}
		if len(oc.m.Samples) >= 4 && len(nc.m.Samples) >= 4 {
			if _, p, err := stats.MannWhitneyU(oc.m.Samples, nc.m.Samples); err == nil {
				cd.P, cd.Significant = p, p < alpha
			}
		}
		// An interleaved control measured the very machine its figures ran on: a busy
		// machine that slowed it 3x slowed them too. Only a control taken apart from its
		// figures is bounded by MaxDrift.
		if cd.Significant && cd.Factor > e.Worst && (cd.Factor <= MaxDrift || cd.Interleaved && cd.Factor <= MaxInterleavedDrift) {
			e.Worst = cd.Factor
		}
		if cd.Significant && cd.Factor < e.Fastest && (cd.Factor >= 1/MaxDrift || cd.Interleaved && cd.Factor >= 1/MaxInterleavedDrift) {
			e.Fastest = cd.Factor
		}
		e.byName[name] = cd
		e.Controls = append(e.Controls, cd)
	}
	var oldRatios, newRatios []mcell
	for _, c := range oldOrder {
		name, ok := controlName(c, decl(c))
		cd, found := e.byName[name]
		nc, inNew := newBy[c.name]
		if !ok || !found || !cd.Interleaved || !inNew || len(cd.oldS) != len(c.m.Samples) || len(cd.newS) != len(nc.m.Samples) {
			continue
		}
		lower, _ := lowerIsBetter(c.m.Unit)
		oldRatios = append(oldRatios, mcell{c.name, c.backend, &Measurement{Name: c.m.Name, Params: c.m.Params, Unit: c.m.Unit, Samples: perSampleRatio(c.m.Samples, cd.oldS, lower)}})
		newRatios = append(newRatios, mcell{nc.name, nc.backend, &Measurement{Name: nc.m.Name, Params: nc.m.Params, Unit: nc.m.Unit, Samples: perSampleRatio(nc.m.Samples, cd.newS, lower)}})
	}
	e.ratioNoise = newPooledNoise(oldRatios, newRatios, decl)
	return e
}

// MaxInterleavedDrift bounds the factor of an interleaved control that counts as the
// machine's drift: up to 10x (a 2-core machine with two busy loops and other jobs slowed
// the sync's machine control 3.4x in docs/ci.md's noise runs).
const MaxInterleavedDrift = 10.0

// perSampleRatio is fig[i]/ctl[i] (lower is better) or fig[i]×ctl[i] (rates), skipping
// non-positive controls.
func perSampleRatio(fig, ctl []float64, lower bool) []float64 {
	out := make([]float64, 0, len(fig))
	for i, v := range fig {
		switch {
		case ctl[i] <= 0:
			continue
		case lower:
			out = append(out, v/ctl[i])
		default:
			out = append(out, v*ctl[i])
		}
	}
	return out
}

// apply accounts for drift in the verdict of a location delta d (see DriftEstimate).
func (e DriftEstimate) apply(d *Delta, oc, nc mcell, opts CompareOptions, pool stats.LogNoise) {
	lower, directed := direction(d)
	if !directed {
		return
	}
	if name, ok := controlName(oc, d.Decl); ok {
		cd, found := e.byName[name]
		if found && cd.Interleaved && len(cd.oldS) == len(oc.m.Samples) && len(cd.newS) == len(nc.m.Samples) {
			applyPaired(d, oc, nc, cd, opts, lower, e.ratioNoise.of(d.Decl, oc.backend), e.Worst)
			return
		}
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
		switch nd.Verdict {
		case VerdictRegression:
			// The regression that stands is the normalised one, which may be another
			// statistic than the raw one (a p99 with the median explained): name it.
			d.P, d.Test = nd.P, nd.Test
			d.Why = fmt.Sprintf("after normalising by the machine drift ×%.2f of %s: %s (as measured: median %+.1f%%)", cd.Factor, name, nd.Why, 100*d.Change)
			return
		case VerdictUnjudged:
			d.Verdict = VerdictUnjudged
			d.Why = fmt.Sprintf("%+.1f%% as measured; normalised by the machine drift ×%.2f of %s: %s", 100*d.Change, cd.Factor, name, nd.Why)
			return
		}
		d.Verdict = VerdictDrift
		d.Why = fmt.Sprintf("%+.1f%%, but the machine drift ×%.2f of %s explains it: normalised change %+.1f%%", 100*d.Change, cd.Factor, name, 100*nd.Change)
		return
	}
	if d.Verdict == VerdictSame && d.Decl.Gated && e.Fastest < 1 && !math.IsNaN(d.Detectable) {
		// No control of its own, on a machine that the controls say got faster: a
		// regression up to that speed-up would show as no change. The test's reach
		// widens by it.
		d.Detectable = math.Expm1(math.Log1p(d.Detectable) - math.Log(e.Fastest))
		if opts.Threshold > 0 && d.Detectable > opts.Threshold {
			d.Verdict = VerdictUnjudged
			d.Why = fmt.Sprintf("no change shown, but the machine measured ×%.2f faster in NEW (%s) and this figure has no control of its own: a regression of up to %s could hide behind it, more than the threshold's %s",
				e.Fastest, e.fastestName(), detectableString(d.Detectable), FormatThreshold(opts.Threshold))
		}
		return
	}
	if d.Verdict != VerdictRegression || e.Worst <= 1 {
		return
	}
	ratio := 1 + d.Change // new/old of the medians
	if !lower && ratio > 0 {
		ratio = 1 / ratio
	}
	// Up to the square of the worst control's factor: on the 2-core machine of
	// docs/ci.md a busy run slowed syncs (and the programming latency made of them) by
	// up to the square of what their machine control measured.
	if ratio <= e.Worst*e.Worst*(1+opts.Threshold) {
		d.Verdict = VerdictUnexplainedDrift
		d.Why = fmt.Sprintf("%+.1f%%, but the machine itself measured up to ×%.2f slower in NEW (%s; figures without a control are taken as drift up to its square), and this figure has no control of its own to tell code from machine; rerun both on a quiet machine",
			100*d.Change, e.Worst, e.worstName())
	}
}

// applyPaired judges a regression of a figure whose control was taken interleaved with
// it (sample i of each in the same round, or around the same sync): the per-sample ratio
// figure/control (figure×control for rates) is judged by the same rules as the figure.
// The regression stands only when the ratio regresses too, by more than
// max(Threshold, MinEffect); otherwise the machine explains it: "drift", which passes.
// Few samples are judged with the ratio's noise pooled over the sizes of the figure;
// when even that cannot judge the ratio, the change is "DRIFT?". A tail regression
// (p99) stands only when the figure's p99 grew by the bound more than its control's.
func applyPaired(d *Delta, oc, nc mcell, cd ControlDrift, opts CompareOptions, lower bool, noise stats.LogNoise, worst float64) {
	d.Drift = cd.Factor
	if d.Verdict != VerdictRegression && d.Verdict != VerdictUnjudged {
		return
	}
	oldR, newR := perSampleRatio(oc.m.Samples, cd.oldS, lower), perSampleRatio(nc.m.Samples, cd.newS, lower)
	if len(oldR) == 0 || len(newR) == 0 {
		return
	}
	os, ns := stats.Summarize(oldR), stats.Summarize(newR)
	nd := *d
	nd.Old, nd.New, nd.Why, nd.P, nd.Test = &os, &ns, "", math.NaN(), ""
	if os.P50 != 0 {
		nd.Change = (ns.P50 - os.P50) / math.Abs(os.P50)
	}
	judgeLocation(&nd, oldR, newR, opts, noise)
	if d.Verdict == VerdictUnjudged {
		// Too noisy as measured (one sample a side on a busy machine): the ratio to
		// the control, with its own pooled noise, may still judge it.
		switch nd.Verdict {
		case VerdictUnjudged, VerdictUnexplainedDrift:
			return
		case VerdictRegression:
			d.Verdict, d.Why = VerdictRegression, nd.Why+" of the ratio to its control"
		default:
			// SEES is then the ratio's: the figure is judged by it.
			d.Verdict, d.P, d.Test, d.Why, d.Detectable = nd.Verdict, nd.P, nd.Test+" of the ratio to its control", "", nd.Detectable
			return
		}
	}
	effect := nd.Change
	// A tail regression (the figure's p99 moved, its median did not) is judged against
	// the control's tail, not its median: a busy machine stretches the tails of a connect
	// and of its control's request alike (×1.8 both, iptables at 1k beside a make test)
	// while both medians stay put. A tail is made of rare stalls that hit a connect or
	// its control's request, seldom both in one round, so the per-sample ratio does not
	// cancel them either: the figure's p99 is set against how much the control's p99 grew.
	tail := d.Test == "p99/fisher" || nd.Test == "p99/fisher"
	controlFactor, controlMoved := cd.Factor, cd.Significant || math.IsNaN(cd.P)
	if tail && d.Old.P99 > 0 {
		oc99, nc99 := stats.Summarize(cd.oldS).P99, stats.Summarize(cd.newS).P99
		effect = (d.New.P99 / d.Old.P99) - 1
		if oc99 > 0 && nc99 > 0 {
			controlFactor = nc99 / oc99
			effect = (d.New.P99/d.Old.P99)/controlFactor - 1
			controlMoved = tailMoved(cd.oldS, cd.newS, oc99, lower, opts.Alpha)
		}
	}
	bound := max(opts.Threshold, opts.MinEffect)
	worse := (effect > 0) == lower
	if nd.Verdict == VerdictUnjudged {
		// Too few samples, or the ratio's noise too large, to tell whether the change
		// goes beyond the machine: the test of the ratio could not see the threshold.
		d.Verdict, d.Detectable = VerdictUnjudged, nd.Detectable
		d.Why = fmt.Sprintf("%+.1f%%, and against its interleaved control %s (×%.2f) the ratio moved %+.1f%%, which its test cannot judge (%s); rerun with more samples or on a quiet machine",
			100*d.Change, cd.Metric, cd.Factor, 100*effect, nd.Why)
		return
	}
	own := math.Abs(math.Log(controlFactor)) > math.Log1p(opts.Threshold) && controlMoved
	if tail && !own && controlFactor > 1 == lower && math.Abs(effect) <= opts.Threshold {
		// A p99 is not a per-sample ratio: set against its control's tail, which grew a
		// little in the same direction, what is left is within the threshold.
		d.Verdict, d.Detectable = VerdictDrift, nd.Detectable
		d.Why = fmt.Sprintf("p99 %+.1f%%, its interleaved control %s's p99 ×%.2f: against it %+.1f%%, within the threshold %s",
			100*(d.New.P99/d.Old.P99-1), cd.Metric, controlFactor, 100*effect, FormatThreshold(opts.Threshold))
		return
	}
	if !own && !tail && nd.Verdict != VerdictRegression {
		// The control did not move beyond the threshold as a whole, but sample by sample
		// it moved with the figure: the ratio, whose test sees the threshold (else the
		// cell is CANNOT JUDGE above), did not regress. Runs of one commit on one quiet
		// machine differ like this (a connect +14% beside its control +5%): the machine,
		// not the code.
		d.Verdict, d.Detectable = VerdictDrift, nd.Detectable
		d.Why = fmt.Sprintf("%+.1f%%, but its interleaved control %s moved with it (×%.2f): the per-sample ratio moved %+.1f%% (%s), no regression; the machine, not the code",
			100*d.Change, cd.Metric, cd.Factor, 100*nd.Change, cmp.Or(nd.Test, "no test"))
		return
	}
	if !own {
		// No drift to explain: this figure's own control, taken beside it, did not move
		// beyond the threshold, whatever other cells' controls did (a verdict must not
		// depend on which other cell drifted), and the ratio to it regressed too.
		what := "its own control"
		if tail {
			what = "its own control's p99"
		}
		d.Why += fmt.Sprintf("; %s unchanged (×%.2f), nothing to explain", what, controlFactor)
		return
	}
	if worse && math.Abs(effect) > bound && (nd.Verdict == VerdictRegression || tail) {
		// The machine changed beyond the threshold, and the control is a first-order
		// model (a busy machine slowed syncs 1.3-3x beside a control at 0.9-3.4x,
		// docs/ci.md): what it leaves unexplained cannot be told from the machine.
		d.Verdict = VerdictUnexplainedDrift
		d.Why = fmt.Sprintf("%+.1f%%; against its interleaved control %s the ratio moved %+.1f%% (%s), but the machine changed between the runs (this control ×%.2f, the worst ×%.2f) and a control explains drift to first order only; rerun both on one machine state (or use kpbench gate)",
			100*d.Change, cd.Metric, 100*effect, cmp.Or(testOf(tail), nd.Test), controlFactor, worst)
		return
	}
	d.Verdict, d.Detectable = VerdictDrift, nd.Detectable
	if tail {
		d.Why = fmt.Sprintf("p99 %+.1f%%, but its interleaved control %s's p99 grew ×%.2f: against it the p99 moved %+.1f%%, within the minimum effect %s; the machine, not the code",
			100*(d.New.P99/d.Old.P99-1), cd.Metric, controlFactor, 100*effect, FormatThreshold(bound))
		return
	}
	d.Why = fmt.Sprintf("%+.1f%%, but against its interleaved control %s (×%.2f) the per-sample ratio moved %+.1f%% (%s): within the minimum effect %s or not significant; the machine, not the code",
		100*d.Change, cd.Metric, cd.Factor, 100*effect, cmp.Or(nd.Test, "no test"), FormatThreshold(bound))
}

// testOf names what judged a tail against its control's tail ("" for a location).
func testOf(tail bool) string {
	if tail {
		return "p99 against the control's p99"
	}
	return ""
}

// tailMoved says whether a control's tail moved in the worse direction significantly:
// more NEW samples beyond OLD's p99 than OLD has (one-sided Fisher exact test, as a
// figure's tail is judged).
func tailMoved(oldS, newS []float64, oldP99 float64, lower bool, alpha float64) bool {
	beyond := func(s []float64) int {
		n := 0
		for _, v := range s {
			if (lower && v > oldP99) || (!lower && v < oldP99) {
				n++
			}
		}
		return n
	}
	return stats.FisherGreater(beyond(newS), len(newS), beyond(oldS), len(oldS)) < alpha
}

// worstName names the control with the worst drift.
func (e DriftEstimate) worstName() string {
	i := slices.IndexFunc(e.Controls, func(c ControlDrift) bool { return c.Significant && c.Factor == e.Worst })
	if i < 0 {
		return ""
	}
	return e.Controls[i].Metric
}

// fastestName names the control with the largest significant speed-up.
func (e DriftEstimate) fastestName() string {
	i := slices.IndexFunc(e.Controls, func(c ControlDrift) bool { return c.Significant && c.Factor == e.Fastest })
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
	return fmt.Sprintf("machine drift: %d control(s) moved ×%.2f..×%.2f NEW/OLD, %d significantly (worst significant slow-down ×%.2f); figures with an interleaved control are judged by their ratio to it (DRIFT? when the machine changed beyond the threshold), older ones normalised by a control that slowed by up to ×%g; gated figures without one that changed within ×%.2f²(1+threshold) are \"DRIFT?\"",
		len(e.Controls), lo, hi, sig, e.Worst, MaxDrift, e.Worst)
}
