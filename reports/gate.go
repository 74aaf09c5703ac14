package reports

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"kpbench.dev/kpbench/reports/stats"
)

// RoundParam is the measurement parameter that numbers the round of an interleaved run
// (scenarios.RunOptions.Rounds): A and B alternate round by round (AB, BA, AB, ...), so
// that drift of the machine hits both. The A/B gate pools a metric's samples across rounds
// and resamples within each round.
const RoundParam = "round"

// GateOptions say how Gate judges B against A within one run.
type GateOptions struct {
	// A and B are the two backends (references as run: "iptables",
	// "kube-proxy-nftables@/path/B") of the same run.
	A, B string
	// Threshold is the relative change (0.10 for 10%) of the median, in the worse
	// direction, that a regression must exceed.
	Threshold float64
	// Confidence of the interval on the ratio (0: 0.95). The significance level of the
	// rank test is 1-Confidence divided by the number of cells judged (Bonferroni), so
	// that A = B does not fail one cell in twenty by chance.
	Confidence float64
	// Resamples of the bootstrap (0: 2000).
	Resamples int
	// Seed of the bootstrap, so that a gate's output is reproducible.
	Seed uint64
}

// GateVerdict is the outcome of one cell of the A/B gate.
type GateVerdict string

// Verdicts of the A/B gate.
const (
	GatePass       GateVerdict = "ok"
	GateBetter     GateVerdict = "better"
	GateRegression GateVerdict = "REGRESSION"
	// GateUnjudged: too few samples for the cell's test, or the cell is missing on one
	// side. It fails the gate unless unjudged cells are allowed.
	GateUnjudged GateVerdict = "cannot judge"
)

// GateCell is one gated metric of the run judged B against A.
type GateCell struct {
	// Metric names the cell: measurement, title and parameters (round excluded).
	Metric string
	// Test is the declaration's test (TestLocation, TestExact, TestFit).
	Test string
	// A and B summarise the pooled samples of each side.
	A, B stats.Summary
	// Ratio is B's median over A's (for a fit: B's p-value over A's), with the bootstrap
	// confidence interval [Low, High] (location test only).
	Ratio, Low, High float64
	// RatioP99 is B's p99 over A's (0 when a side has fewer than 2 samples).
	RatioP99 float64
	// P is the rank test's p-value (location), or B's fit p-value (fit).
	P float64
	// Rounds is the number of rounds with samples on both sides.
	Rounds int
	// Controlled is true when both sides carried an interleaved control (lookups,
	// syncs); ControlledRatio is then B's median per-sample ratio to its control over
	// A's. It is shown beside the verdict, which judges the figures as measured.
	Controlled      bool
	ControlledRatio float64
	Verdict         GateVerdict
	// Reason explains a verdict other than ok.
	Reason string
}

// GateReport is the A/B gate's judgement of one run.
type GateReport struct {
	Options GateOptions
	// Alpha is the per-cell significance level used (Bonferroni).
	Alpha float64
	Cells []GateCell
}

// gateSide gathers one metric's samples of one backend, by round.
type gateSide struct {
	byRound map[string][]float64
	// ctl holds, by round, the per-sample ratio of the samples to their interleaved
	// control (figure/control; figure×control for rates); uncontrolled is set when a
	// round's measurement has no such control.
	ctl          map[string][]float64
	uncontrolled bool
	// shares and counts of a distribution (summed over rounds).
	shares []float64
	counts []int
}

func (s *gateSide) pooled() []float64 {
	var out []float64
	for _, r := range slices.Sorted(maps.Keys(s.byRound)) {
		out = append(out, s.byRound[r]...)
	}
	return out
}

// Gate judges B against A on every gated metric of res that either side measured. The
// error is for bad input: A or B not in the run, A = B, no gated metric.
func Gate(res *Results, o GateOptions) (*GateReport, error) {
	if o.A == "" || o.B == "" {
		return nil, errors.New("gate: --a and --b name the two backends of the run to compare")
	}
	if o.A == o.B {
		return nil, fmt.Errorf("gate: --a and --b are both %q", o.A)
	}
	if o.Confidence == 0 {
		o.Confidence = 0.95
	}
	if o.Confidence <= 0 || o.Confidence >= 1 {
		return nil, fmt.Errorf("gate: confidence %g: want a value between 0 and 1", o.Confidence)
	}
	if o.Resamples == 0 {
		o.Resamples = 2000
	}
	var backends []string
	sides := map[string]map[string]*gateSide{} // backend → key → side
	decls := map[string]Metric{}
	for i := range res.Runs {
		run := &res.Runs[i]
		backends = append(backends, run.Backend)
		if run.Backend != o.A && run.Backend != o.B {
			continue
		}
		if sides[run.Backend] == nil {
			sides[run.Backend] = map[string]*gateSide{}
		}
		byName := map[string]*Measurement{}
		for j := range run.Measurements {
			m := &run.Measurements[j]
			byName[metricName(run.Backend, m)] = m
		}
		for j := range run.Measurements {
			m := &run.Measurements[j]
			d, ok := MetricOf(res.Metrics, m)
			if !ok || !d.For(m).Gated {
				continue
			}
			key := gateKey(d, m)
			decls[key] = d
			s := sides[run.Backend][key]
			if s == nil {
				s = &gateSide{byRound: map[string][]float64{}}
				sides[run.Backend][key] = s
			}
			s.byRound[m.Params[RoundParam]] = append(s.byRound[m.Params[RoundParam]], m.Samples...)
			if d.Test == TestLocation || d.Test == "" {
				s.addControl(d, run.Backend, m, byName)
			}
			if d.Test == TestFit {
				s.addCounts(m)
			}
		}
	}
	for _, b := range []string{o.A, o.B} {
		if sides[b] == nil {
			return nil, fmt.Errorf("gate: backend %q is not in the run (it has: %s)", b, strings.Join(slices.Compact(slices.Sorted(slices.Values(backends))), ", "))
		}
	}
	if len(decls) == 0 {
		return nil, errors.New("gate: the run has no gated metric")
	}
	keys := slices.Sorted(maps.Keys(decls))
	rep := &GateReport{Options: o, Alpha: (1 - o.Confidence) / float64(len(keys))}
	rng := rand.New(rand.NewPCG(o.Seed, 0x6b7062))
	for _, k := range keys {
		rep.Cells = append(rep.Cells, judgeCell(k, decls[k], sides[o.A][k], sides[o.B][k], o, rep.Alpha, rng))
	}
	return rep, nil
}

// addControl adds the per-sample ratios of m to its interleaved control in the same run
// and round, or marks the side uncontrolled.
func (s *gateSide) addControl(d Metric, backend string, m *Measurement, byName map[string]*Measurement) {
	name, ok := controlName(mcell{backend: backend, m: m}, d)
	c := byName[name]
	if !ok || c == nil || c.Extra[ExtraInterleaved] != 1 || len(c.Samples) != len(m.Samples) {
		s.uncontrolled = true
		return
	}
	if s.ctl == nil {
		s.ctl = map[string][]float64{}
	}
	lower := d.Better != HigherIsBetter
	r := m.Params[RoundParam]
	s.ctl[r] = append(s.ctl[r], perSampleRatio(m.Samples, c.Samples, lower)...)
}

// controlled returns the side of the per-sample ratios to the control, nil when the
// side has none.
func (s *gateSide) controlled() *gateSide {
	if s.uncontrolled || len(s.ctl) == 0 {
		return nil
	}
	return &gateSide{byRound: s.ctl}
}

// addCounts adds a distribution measurement's counts per endpoint, and its expected shares.
func (s *gateSide) addCounts(m *Measurement) {
	if s.counts == nil {
		s.counts = make([]int, len(m.Samples))
		s.shares = make([]float64, len(m.Samples))
		for i := range s.shares {
			s.shares[i] = m.Extra[fmt.Sprintf("share_%d", i)]
		}
	}
	if len(m.Samples) != len(s.counts) {
		return
	}
	for i, v := range m.Samples {
		s.counts[i] += int(v)
	}
}

// gateKey names a metric across both sides and all rounds.
func gateKey(d Metric, m *Measurement) string {
	p := maps.Clone(m.Params)
	delete(p, RoundParam)
	name := m.Name
	if d.Title != "" {
		name += " (" + d.Title + ")"
	}
	if len(p) == 0 {
		return name
	}
	return name + " {" + paramString(p, ", ") + "}"
}

func judgeCell(key string, d Metric, a, b *gateSide, o GateOptions, alpha float64, rng *rand.Rand) GateCell {
	c := GateCell{Metric: key, Test: cmp.Or(d.Test, TestLocation), Verdict: GateUnjudged}
	if a == nil || b == nil {
		c.Reason = fmt.Sprintf("measured on %s only", map[bool]string{true: "B", false: "A"}[a == nil])
		return c
	}
	sa, sb := a.pooled(), b.pooled()
	c.A, c.B = Summarize(sa), Summarize(sb)
	for r := range a.byRound {
		if len(b.byRound[r]) > 0 {
			c.Rounds++
		}
	}
	minN := d.MinSamples
	if minN == 0 {
		minN = map[string]int{TestLocation: 5, TestExact: 1, TestFit: 2}[c.Test]
	}
	if len(sa) < minN || len(sb) < minN {
		c.Reason = fmt.Sprintf("%d and %d samples, the %s test needs %d per side", len(sa), len(sb), c.Test, minN)
		return c
	}
	if c.A.P99 != 0 && c.A.N > 1 && c.B.N > 1 {
		c.RatioP99 = c.B.P99 / c.A.P99
	}
	switch c.Test {
	case TestFit:
		return judgeFit(c, a, b, alpha)
	case TestExact:
		if c.A.P50 == 0 {
			c.Reason = "A's value is 0: no ratio"
			return c
		}
		c.Ratio = c.B.P50 / c.A.P50
		c.Low, c.High = c.Ratio, c.Ratio
		c.Verdict, c.Reason = directionVerdict(d.Better, c.Ratio, o.Threshold, true)
		return c
	}
	if c.A.P50 == 0 {
		c.Reason = "A's median is 0: no ratio"
		return c
	}
	c.Ratio = c.B.P50 / c.A.P50
	if ca, cb := a.controlled(), b.controlled(); ca != nil && cb != nil {
		// Shown, not judged: B's per-sample ratio to its control over A's. Measured
		// here (docs/ci.md), it made the gate worse: the lookup control does not track
		// connects from one pass to the next (A = B: raw 0.63-0.95, against the control
		// 1.3-1.9), and the sync's machine control is noisy beside a 60 ms partial sync
		// and slowed after iptables@slow-N's idle wait (a real 28% slowdown read 0.94).
		if ma := median(ca.pooled()); ma > 0 {
			c.Controlled = true
			c.ControlledRatio = median(cb.pooled()) / ma
		}
	}
	c.Low, c.High = bootstrapRatio(a, b, o, rng)
	_, p, err := stats.MannWhitneyU(sa, sb)
	if err != nil {
		c.Reason = "rank test: " + err.Error()
		return c
	}
	c.P = p
	if p >= alpha {
		c.Verdict = GatePass
		return c
	}
	// Significant: the interval must lie on the same side of 1 as the ratio.
	if (c.Ratio > 1 && c.Low <= 1) || (c.Ratio < 1 && c.High >= 1) {
		c.Verdict = GatePass
		return c
	}
	c.Verdict, c.Reason = directionVerdict(d.Better, c.Ratio, o.Threshold, false)
	// With rounds, the change must show in every round: a pooled difference that some
	// round contradicts is drift within a round, not B.
	if c.Rounds >= 2 && c.Verdict != GatePass {
		for _, r := range slices.Sorted(maps.Keys(a.byRound)) {
			ma, mb := median(slices.Clone(a.byRound[r])), median(slices.Clone(b.byRound[r]))
			if len(b.byRound[r]) == 0 || ma == 0 {
				continue
			}
			if (mb/ma > 1) != (c.Ratio > 1) {
				c.Verdict, c.Reason = GatePass, fmt.Sprintf("round %s disagrees (B/A %.3f): drift, not B", r, mb/ma)
				break
			}
		}
	}
	return c
}

// directionVerdict turns a significant ratio B/A into a verdict for the metric's
// direction: worse beyond the threshold is a regression.
func directionVerdict(better Better, ratio, threshold float64, exact bool) (GateVerdict, string) {
	var worse float64 // the relative change in the worse direction
	switch better {
	case LowerIsBetter:
		worse = ratio - 1
	case HigherIsBetter:
		worse = 1 - ratio
	default:
		return GatePass, "" // gated without a direction: shown, not judged
	}
	switch {
	case worse > threshold:
		return GateRegression, fmt.Sprintf("B is %.1f%% worse than A (threshold %s)", 100*worse, FormatThreshold(threshold))
	case worse < 0 && (!exact || ratio != 1):
		return GateBetter, ""
	default:
		return GatePass, ""
	}
}

// judgeFit: a distribution that fits its expected shares on A and not on B is a
// regression (counts summed over rounds; chi-square at the Bonferroni level).
func judgeFit(c GateCell, a, b *gateSide, alpha float64) GateCell {
	_, _, pa, errA := stats.ChiSquareGOF(a.counts, a.shares)
	_, _, pb, errB := stats.ChiSquareGOF(b.counts, b.shares)
	if err := errors.Join(errA, errB); err != nil {
		c.Reason = "fit: " + err.Error()
		return c
	}
	c.P = pb
	if pa > 0 {
		c.Ratio = pb / pa
	}
	switch {
	case pb < alpha && pa >= alpha:
		c.Verdict, c.Reason = GateRegression, fmt.Sprintf("fits on A (p = %.3g), not on B (p = %.3g)", pa, pb)
	case pb < alpha:
		c.Verdict, c.Reason = GatePass, fmt.Sprintf("misfit on both A (p = %.3g) and B (p = %.3g)", pa, pb)
	default:
		c.Verdict = GatePass
	}
	return c
}

// bootstrapRatio is the percentile interval of median(B)/median(A) at the options'
// confidence, resampling each side within each round (a stratified bootstrap: the
// rounds' drift stays in the rounds) by moving blocks (blockResample): neighbouring
// samples share syncs and busy seconds, and resampling them one by one made the
// interval too narrow for a single round (ported from branch ab2).
func bootstrapRatio(a, b *gateSide, o GateOptions, rng *rand.Rand) (lo, hi float64) {
	ratios := make([]float64, 0, o.Resamples)
	var bufA, bufB []float64
	for range o.Resamples {
		bufA, bufB = resample(bufA[:0], a.byRound, rng), resample(bufB[:0], b.byRound, rng)
		ma, mb := median(bufA), median(bufB)
		if ma != 0 {
			ratios = append(ratios, mb/ma)
		}
	}
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(ratios)
	q := (1 - o.Confidence) / 2
	return stats.Quantile(ratios, q), stats.Quantile(ratios, 1-q)
}

// resample appends a moving-block resample of every round of byRound, round by round.
func resample(dst []float64, byRound map[string][]float64, rng *rand.Rand) []float64 {
	for _, r := range slices.Sorted(maps.Keys(byRound)) {
		dst = blockResample(dst, byRound[r], rng)
	}
	return dst
}

// blockResample appends to dst a moving-block bootstrap resample of xs (in the order
// the samples were taken): runs of ceil(sqrt(n)) neighbouring samples from random
// starts until n are drawn, so that the dependence between neighbours (one sync, one
// busy second) is kept in each resample. Block length 1 for n < 4 is the plain
// bootstrap.
func blockResample(dst, xs []float64, rng *rand.Rand) []float64 {
	n := len(xs)
	if n == 0 {
		return dst
	}
	l := max(1, int(math.Ceil(math.Sqrt(float64(n)))))
	for drawn := 0; drawn < n; {
		start := rng.IntN(n - l + 1)
		k := min(l, n-drawn)
		dst = append(dst, xs[start:start+k]...)
		drawn += k
	}
	return dst
}

func median(s []float64) float64 {
	slices.Sort(s)
	return stats.Quantile(s, 0.5)
}

// Failed returns the cells that fail the gate: regressions, and cells that cannot be
// judged unless allowUnjudged.
func (r *GateReport) Failed(allowUnjudged bool) []GateCell {
	var out []GateCell
	for _, c := range r.Cells {
		if c.Verdict == GateRegression || (c.Verdict == GateUnjudged && !allowUnjudged) {
			out = append(out, c)
		}
	}
	return out
}

// Write prints the A/B ratios, one line per cell, and the verdict.
func (r *GateReport) Write(w io.Writer) error {
	o := r.Options
	var b strings.Builder
	fmt.Fprintf(&b, "A/B gate: B = %s against A = %s, within one run\n", o.B, o.A)
	fmt.Fprintf(&b, "%-12s  %-8s  %-22s  %-8s  %-10s  %-12s  %-12s  %s\n", "verdict", "B/A p50", "CI", "B/A p99", "p", "A p50 (n)", "B p50 (n)", "metric")
	counts := map[GateVerdict]int{}
	for _, c := range r.Cells {
		counts[c.Verdict]++
		ci := "—"
		if c.Test == TestLocation && c.Ratio != 0 {
			ci = fmt.Sprintf("[%.3f, %.3f]", c.Low, c.High)
		}
		fmt.Fprintf(&b, "%-12s  %-8s  %-22s  %-8s  %-10s  %-12s  %-12s  %s", c.Verdict, gateRatio(c.Ratio), ci, gateRatio(c.RatioP99),
			pString(c.P), fmt.Sprintf("%.4g (%d)", c.A.P50, c.A.N), fmt.Sprintf("%.4g (%d)", c.B.P50, c.B.N), c.Metric)
		if c.Controlled {
			fmt.Fprintf(&b, "  [B/A against its interleaved control: %s]", gateRatio(c.ControlledRatio))
		}
		if c.Reason != "" {
			fmt.Fprintf(&b, "  — %s", c.Reason)
		}
		b.WriteByte('\n')
	}
	var parts []string
	for _, v := range []GateVerdict{GateRegression, GateUnjudged, GateBetter, GatePass} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	fmt.Fprintf(&b, "\n%s (threshold %s, %g%% interval, rank-test alpha %.2g per cell = %s/%d cells)\n", strings.Join(parts, ", "),
		FormatThreshold(o.Threshold), 100*o.Confidence, r.Alpha, levelString(1-o.Confidence), len(r.Cells))
	_, err := io.WriteString(w, b.String())
	return err
}

// levelString prints a level computed from one a person wrote as they wrote it: 1-0.95
// is "0.05", not 0.050000000000000044.
func levelString(v float64) string {
	return strconv.FormatFloat(v, 'g', 10, 64)
}

func gateRatio(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.3f", v)
}

func pString(p float64) string {
	if p == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2g", p)
}
