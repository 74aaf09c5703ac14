package reports

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"kpbench.dev/kpbench/reports/stats"
)

// CompareOptions tune Compare.
type CompareOptions struct {
	// Threshold is the relative change (0.10 for 10%) a metric must exceed, in the worse
	// direction, to count as a regression. Zero means any significant change counts.
	Threshold float64
	// Alpha is the significance level of every test (before the Holm correction of the
	// distributions); 0 means 0.05.
	Alpha float64
	// FitAlpha is the family-wise significance level of the distribution fits, Holm-
	// corrected over the distributions judged; 0 means 0.001. It is stricter than Alpha
	// because the selection bugs it is for (a 1/n where 1/(n-i) belongs) give p-values
	// far below it with 1,000 connections, while at 0.05 a same-vs-same pair of fair
	// distributions fails one time in twenty.
	FitAlpha float64
	// MinSamples is the number of samples each side needs for the rank test (Mann-Whitney
	// U); 0 means 4. Below it the small-sample rules apply (see Compare).
	MinSamples int
	// AllowMissing lets metrics present in OLD but absent from NEW pass. By default they
	// fail the comparison: a benchmark that silently stopped running is a regression of
	// the bench.
	AllowMissing bool
	// AllowUnjudged lets gated metrics that compare cannot judge pass (too few samples,
	// a side without a figure, and under Strict drift it cannot explain). By default
	// they fail.
	AllowUnjudged bool
	// MinEffect is the least change that a figure with an interleaved control must
	// still show against that control (its per-sample ratio) to be a regression, beside
	// Threshold on the raw figure: the larger of the two applies. 0 means
	// DefaultMinEffect; a negative value means none (Threshold alone).
	MinEffect float64
	// Strict makes "DRIFT?" (a change of a figure without a control of its own that the
	// controls' drift could explain) fail like "cannot judge". By default it is shown
	// and passes: compare cannot tell code from machine there, and failing on it made
	// every same-commit pair of runs on a shared machine fail.
	Strict bool
}

// DefaultMinEffect is CompareOptions.MinEffect's default: 20%. On the shared 2-core
// machine of docs/ci.md, same-commit pairs moved the ratio of a sync to its machine
// control by up to this much (the control sees CPU share, not what a sync spends in the
// kernel), while iptables@slow-25 moves it by 25%.
const DefaultMinEffect = 0.20

// Verdict is the outcome of one metric's comparison.
type Verdict string

// Verdicts.
const (
	// VerdictSame means no significant difference: "~".
	VerdictSame Verdict = "~"
	// VerdictBetter is a significant change in the good direction.
	VerdictBetter Verdict = "better"
	// VerdictWorse is a significant change in the bad direction within the threshold,
	// or beyond it on a metric that is not gated.
	VerdictWorse Verdict = "worse"
	// VerdictRegression is a significant change in the bad direction beyond the
	// threshold of a gated metric, a fit that became a misfit, or a changed exact figure
	// in the worse direction: it fails the comparison.
	VerdictRegression Verdict = "REGRESSION"
	// VerdictDifferent is a changed exact figure of a gated metric in the good direction
	// (fewer rules): it fails too, because an exact figure must not move unnoticed;
	// accept it by taking NEW as the baseline.
	VerdictDifferent Verdict = "DIFFERENT"
	// VerdictChanged is a significant change of a figure without a good direction:
	// reported, never a failure.
	VerdictChanged Verdict = "changed"
	// VerdictDrift is a change that the machine drift measured beside the figure (its
	// control) explains: the normalised change is not a regression. Passes.
	VerdictDrift Verdict = "drift"
	// VerdictUnexplainedDrift is a change beyond the threshold of a gated figure that
	// has no control of its own, in a comparison whose controls show the machine
	// drifted by as much: compare cannot tell code from machine. Fails unless
	// AllowUnjudged.
	VerdictUnexplainedDrift Verdict = "DRIFT?"
	// VerdictUnjudged is a gated figure compare cannot judge: too few samples for any
	// of its rules, or a side without a figure. Fails unless AllowUnjudged.
	VerdictUnjudged Verdict = "CANNOT JUDGE"
	// VerdictMissing is a metric in OLD that NEW lacks.
	VerdictMissing Verdict = "missing"
	// VerdictNew is a metric only NEW has.
	VerdictNew Verdict = "new"
)

// Delta is one metric (measurement name, backend and params) in both runs.
type Delta struct {
	// Metric names the metric: "sync/backend=iptables/services=20000/kind=full".
	Metric string
	// Unit is the metric's unit.
	Unit string
	// Decl is the metric's declaration (NEW's, else OLD's, else LegacyMetrics').
	Decl Metric
	// Old and New are the summaries (nil when the side lacks the metric).
	Old, New *stats.Summary
	// Change is (new - old) / old of the medians (0 when a side is missing or old is 0).
	Change float64
	// P is the p-value of the test that decided (NaN when none ran). Test names it.
	P float64
	// Test names the rule that decided: "mann-whitney", "pooled-t", "separation",
	// "exact", "chi-square/holm"; empty when none applied.
	Test string
	// Detectable is the smallest relative change (0.12 for 12%) the test that judged the
	// figure detects with DetectPower at its sample counts, noise and (for figures
	// without a control of their own) the machine's drift; +Inf when it could see none,
	// 0 for exact figures, NaN where no threshold applies (distributions, figures not
	// compared).
	Detectable float64
	// Drift is the machine drift factor of this mcell's control (new/old medians of the
	// control), 1 when it has none or the control did not move significantly.
	Drift float64
	// Why says, for verdicts that fail or that compare could not reach, the reason.
	Why string
	// Informational is the reason a side's scenario gave for declaring a gated figure
	// informational (Measurement.Informational); Decl is then not gated.
	Informational string
	// Verdict is the outcome.
	Verdict Verdict
}

// Comparison is the outcome of Compare.
type Comparison struct {
	// Options are the options used (defaults filled in).
	Options CompareOptions
	// Deltas has one entry per metric, in OLD's order, then metrics only NEW has.
	Deltas []Delta
	// Drift is the machine drift between the runs that the controls measured.
	Drift DriftEstimate
	// Notes are warnings that do not change the verdict, such as a backend whose run
	// labels (its options) differ between the runs.
	Notes []string
}

// mcell is one metric of one run.
type mcell struct {
	name    string
	backend string
	m       *Measurement
}

// index lists r's metrics in file order and by name; the first of duplicates wins, as
// in the reports.
func index(r *Results) ([]mcell, map[string]mcell) {
	var order []mcell
	by := map[string]mcell{}
	for _, p := range points(r) {
		name := metricName(p.backend, p.m)
		if _, dup := by[name]; dup {
			continue
		}
		c := mcell{name, p.backend, p.m}
		by[name] = c
		order = append(order, c)
	}
	return order, by
}

// Compare matches every metric of old with new (by measurement name, backend and params)
// and judges each by its declaration (Results.Metrics; LegacyMetrics for files written
// before runs recorded them):
//
//   - location tests (times, rates): with at least MinSamples (4) a side and the
//     declared minimum, the two-sided Mann-Whitney U test on the raw samples at Alpha,
//     and the change of the median beyond Threshold; for declarations that list "p99",
//     also the tail: the p99 beyond Threshold and significantly more NEW samples above
//     OLD's p99 than OLD has (Fisher's exact test). With fewer samples, the pooled rule:
//     a t-test on log samples with the variance pooled over the cells of the same
//     declaration and backend in both runs (relative noise is taken alike across sizes),
//     when that pool has 3 degrees of freedom or more (and "cannot judge" when the pooled
//     noise is so large that even a 2x change would not be significant); else, with 2
//     or more a side, the
//     separation rule: every NEW sample worse than every OLD sample by more than the
//     threshold. One sample a side and nothing to pool with: cannot judge.
//   - exact tests (rule counts): any change of the median fails.
//   - fit tests (distributions): a fit in OLD that is a misfit in NEW, each side's
//     chi-square p-values corrected for the number of distributions judged with Holm's
//     step-down method (which controls the family-wise error at FitAlpha, 0.001).
//
// Gated metrics fail the comparison when they regress, and when they cannot be judged
// unless AllowUnjudged. Metrics that are not gated are shown and never fail. Drift: see
// EstimateDrift.
func Compare(oldRun, newRun *Results, opts CompareOptions) *Comparison {
	if opts.Alpha == 0 {
		opts.Alpha = 0.05
	}
	if opts.MinSamples == 0 {
		opts.MinSamples = 4
	}
	if opts.FitAlpha == 0 {
		opts.FitAlpha = 0.001
	}
	switch {
	case opts.MinEffect == 0:
		opts.MinEffect = DefaultMinEffect
	case opts.MinEffect < 0:
		opts.MinEffect = 0
	}
	oldOrder, oldBy := index(oldRun)
	newOrder, newBy := index(newRun)
	c := &Comparison{Options: opts}
	legacy := LegacyMetrics()
	decl := func(cl mcell) Metric {
		d, ok := MetricOf(newRun.Metrics, cl.m)
		if !ok {
			d, ok = MetricOf(oldRun.Metrics, cl.m)
		}
		if ok {
			if l, lok := MetricOf(legacy, cl.m); lok && d.Control == nil {
				d.Control = l.Control // files declared before controls were
			}
			return d
		}
		if d, ok := MetricOf(legacy, cl.m); ok {
			return d
		}
		lower, directed := lowerIsBetter(cl.m.Unit)
		d = Metric{Measurement: cl.m.Name, Unit: cl.m.Unit, Test: TestLocation}
		if directed {
			d.Better = map[bool]Better{true: LowerIsBetter, false: HigherIsBetter}[lower]
		}
		return d
	}
	c.Drift = EstimateDrift(oldRun, newRun, decl, opts.Alpha)
	pool := newPooledNoise(oldOrder, newOrder, decl)
	var fits []int
	seen := map[string]bool{}
	for _, oc := range oldOrder {
		seen[oc.name] = true
		d := Delta{Metric: oc.name, Unit: oc.m.Unit, Decl: decl(oc), P: math.NaN(), Detectable: math.NaN(), Drift: 1}
		oldSum := oc.m.Summary
		d.Old = &oldSum
		nc, ok := newBy[oc.name]
		if !ok {
			d.Verdict = VerdictMissing
			c.Deltas = append(c.Deltas, d)
			continue
		}
		newSum := nc.m.Summary
		d.New = &newSum
		if decl := d.Decl.For(oc.m, nc.m); d.Decl.Gated && !decl.Gated {
			d.Decl, d.Informational = decl, cmp.Or(nc.m.Informational, oc.m.Informational)
		}
		if d.Old.P50 != 0 {
			d.Change = (d.New.P50 - d.Old.P50) / math.Abs(d.Old.P50)
		}
		switch {
		case d.Decl.Test == TestFit:
			fits = append(fits, len(c.Deltas))
		case !oc.m.Measured() || !nc.m.Measured():
			d.Verdict = VerdictSame
			if d.Decl.Gated {
				d.Verdict, d.Why = VerdictUnjudged, "no figure on "+unmeasuredSide(oc.m, nc.m)
			}
		case d.Decl.Test == TestExact:
			judgeExact(&d)
		default:
			judgeLocation(&d, oc.m.Samples, nc.m.Samples, opts, pool.of(d.Decl, oc.backend))
			c.Drift.apply(&d, oc, nc, opts, pool.of(d.Decl, oc.backend))
		}
		c.Deltas = append(c.Deltas, d)
	}
	judgeFits(c.Deltas, fits, oldBy, newBy, opts.FitAlpha)
	for _, e := range newOrder {
		if seen[e.name] {
			continue
		}
		ns := e.m.Summary
		c.Deltas = append(c.Deltas, Delta{Metric: e.name, Unit: e.m.Unit, Decl: decl(e), New: &ns, P: math.NaN(), Detectable: math.NaN(), Drift: 1, Verdict: VerdictNew})
	}
	c.Notes = labelNotes(oldRun, newRun)
	return c
}

// unmeasuredSide names the side(s) whose measurement holds no figure.
func unmeasuredSide(o, n *Measurement) string {
	what := func(m *Measurement) string {
		if len(m.Samples) == 0 {
			return "no sample"
		}
		return fmt.Sprintf("%d samples, none a figure", len(m.Samples))
	}
	switch {
	case !o.Measured() && !n.Measured():
		return fmt.Sprintf("either side (OLD: %s, NEW: %s)", what(o), what(n))
	case !o.Measured():
		return "OLD (" + what(o) + ")"
	}
	return "NEW (" + what(n) + ")"
}

// labelNotes names the backends run in both whose run labels differ: their metrics are
// compared all the same, but the difference may be the options, not the code.
func labelNotes(oldRun, newRun *Results) []string {
	labels := func(r *Results) map[string]map[string]string {
		m := map[string]map[string]string{}
		for _, run := range r.Runs {
			m[run.Backend] = run.Labels
		}
		return m
	}
	oldL, newL := labels(oldRun), labels(newRun)
	var notes []string
	for _, run := range oldRun.Runs {
		nl, ok := newL[run.Backend]
		if !ok || maps.Equal(oldL[run.Backend], nl) {
			continue
		}
		notes = append(notes, fmt.Sprintf("%s ran with different labels: old {%s}, new {%s}", run.Backend, paramString(oldL[run.Backend], ", "), paramString(nl, ", ")))
	}
	return notes
}

// direction returns whether lower is better for d, and whether it has a direction.
func direction(d *Delta) (lower, directed bool) {
	switch d.Decl.Better {
	case LowerIsBetter:
		return true, true
	case HigherIsBetter:
		return false, true
	}
	if d.Decl.Test == TestExact || d.Decl.Test == TestFit {
		return false, false
	}
	return lowerIsBetter(d.Unit)
}

// judgeExact judges a deterministic figure: any change of the median.
func judgeExact(d *Delta) {
	d.Test, d.Detectable = "exact", 0
	d.Verdict = VerdictSame
	if d.New.P50 == d.Old.P50 {
		return
	}
	lower, directed := direction(d)
	worse := !directed || (d.New.P50 > d.Old.P50) == lower
	switch {
	case !d.Decl.Gated && directed && !worse:
		d.Verdict = VerdictBetter
	case !d.Decl.Gated:
		d.Verdict = VerdictChanged
	case worse:
		d.Verdict = VerdictRegression
		d.Why = fmt.Sprintf("exact figure changed from %s to %s", sig3(d.Old.P50), sig3(d.New.P50))
	default:
		d.Verdict = VerdictDifferent
		d.Why = fmt.Sprintf("exact figure changed from %s to %s (take NEW as the baseline if intended)", sig3(d.Old.P50), sig3(d.New.P50))
	}
}

// DetectPower is the probability with which a cell's test must detect a change of the
// threshold's size for compare to say "~" (no change) of it: the conventional 80%. A test
// that could not see the threshold and found nothing says nothing ("cannot judge").
const DetectPower = 0.8

// judgeLocation fills P, Test, Detectable and Verdict of a location metric both runs
// measured. A gated figure with a direction that shows no significant change is "~" only
// when its test could see a change of the threshold's size (Detectable), else "cannot
// judge".
func judgeLocation(d *Delta, oldS, newS []float64, opts CompareOptions, pool stats.LogNoise) {
	d.Verdict = VerdictSame
	lower, directed := direction(d)
	minN := max(opts.MinSamples, d.Decl.MinSamples)
	// significant is +1 (NEW larger), -1 (NEW smaller) or 0 (not shown).
	significant := 0
	// reach is the smallest change of the log (a factor exp(reach)) the test detects with
	// DetectPower.
	reach := math.Inf(1)
	switch {
	case len(oldS) >= minN && len(newS) >= minN:
		_, p, err := stats.MannWhitneyU(oldS, newS)
		if err != nil {
			d.Verdict, d.Why = VerdictUnjudged, err.Error()
			return
		}
		d.P, d.Test = p, "mann-whitney"
		reach = stats.MannWhitneyDetectable(oldS, newS, opts.Alpha, DetectPower)
		if p < opts.Alpha && d.Change != 0 {
			significant = sign(d.Change)
		}
	case len(oldS) >= opts.MinSamples && len(newS) >= opts.MinSamples && !d.Decl.Gated:
		// Not gated: the rank test alone, below the declared minimum.
		if _, p, err := stats.MannWhitneyU(oldS, newS); err == nil {
			d.P, d.Test = p, "mann-whitney"
			reach = stats.MannWhitneyDetectable(oldS, newS, opts.Alpha, DetectPower)
			if p < opts.Alpha && d.Change != 0 {
				significant = sign(d.Change)
			}
		}
	case pool.DF >= minPooledDF && stats.AllPositive(oldS) && stats.AllPositive(newS):
		p, diff := pool.TTest(oldS, newS)
		d.P, d.Test = p, "pooled-t"
		reach = pool.Detectable(len(oldS), len(newS), opts.Alpha, DetectPower)
		if p < opts.Alpha && diff != 0 {
			significant = sign(diff)
		}
	case len(oldS) >= 2 && len(newS) >= 2:
		d.Test = "separation"
		significant = separated(oldS, newS, opts.Threshold)
		// It shows a change only beyond the threshold plus the spread of both sides.
		if stats.AllPositive(oldS) && stats.AllPositive(newS) {
			reach = math.Log1p(opts.Threshold) + (math.Log(slices.Max(oldS)/slices.Min(oldS))+math.Log(slices.Max(newS)/slices.Min(newS)))/2
		}
	default:
		if d.Decl.Gated {
			d.Verdict = VerdictUnjudged
			d.Why = fmt.Sprintf("%d and %d samples: too few for any rule (declared minimum %d a side)", len(oldS), len(newS), minN)
		}
		return
	}
	d.Detectable = math.Expm1(reach)
	if significant == 0 {
		d.Verdict = judgeTail(d, oldS, newS, opts, lower, directed)
		if d.Verdict == VerdictSame && directed && d.Decl.Gated && opts.Threshold > 0 && !(d.Detectable <= opts.Threshold) {
			d.Verdict = VerdictUnjudged
			d.Why = fmt.Sprintf("%s with %d and %d samples could see a change of %s at %d%% power, not the threshold's %s", d.Test, len(oldS), len(newS),
				detectableString(d.Detectable), int(100*DetectPower), FormatThreshold(opts.Threshold))
			if d.Test == "separation" {
				d.Why = fmt.Sprintf("separation with %d and %d samples shows only changes beyond %s (the threshold plus both sides' spread), not the threshold's %s",
					len(oldS), len(newS), detectableString(d.Detectable), FormatThreshold(opts.Threshold))
			}
			if d.Test == "pooled-t" {
				d.Why += fmt.Sprintf(" (pooled noise ±%.0f%%, log-sd over %d df)", 100*math.Expm1(math.Sqrt(pool.Variance())), pool.DF)
			}
		}
		return
	}
	if !directed {
		d.Verdict = VerdictChanged
		return
	}
	worse := (significant > 0) == lower
	switch {
	case !worse:
		d.Verdict = VerdictBetter
	case math.Abs(d.Change) > opts.Threshold && d.Decl.Gated:
		d.Verdict = VerdictRegression
		d.Why = fmt.Sprintf("median %+.1f%% (%s)", 100*d.Change, d.Test)
	default:
		d.Verdict = VerdictWorse
	}
}

// detectableString prints the smallest change a test could see: "±12%", or "no change
// at all" when it could see none.
func detectableString(v float64) string {
	if math.IsInf(v, 1) || math.IsNaN(v) {
		return "no change at all"
	}
	return fmt.Sprintf("±%.0f%%", 100*v)
}

// judgeTail judges the p99 of declarations that gate it, when the median did not move:
// the p99 beyond the threshold in the worse direction and significantly more NEW samples
// beyond OLD's p99 than OLD has (one-sided Fisher exact test). It needs 50 samples a
// side, where a p99 means something.
func judgeTail(d *Delta, oldS, newS []float64, opts CompareOptions, lower, directed bool) Verdict {
	if !directed || !d.Decl.Gated || !slices.Contains(d.Decl.Statistics, "p99") || len(oldS) < 50 || len(newS) < 50 || d.Old.P99 == 0 {
		return VerdictSame
	}
	change := (d.New.P99 - d.Old.P99) / math.Abs(d.Old.P99)
	if (change > 0) != lower || math.Abs(change) <= opts.Threshold {
		return VerdictSame
	}
	beyond := func(s []float64) int {
		n := 0
		for _, v := range s {
			if (lower && v > d.Old.P99) || (!lower && v < d.Old.P99) {
				n++
			}
		}
		return n
	}
	p := stats.FisherGreater(beyond(newS), len(newS), beyond(oldS), len(oldS))
	if p >= opts.Alpha {
		return VerdictSame
	}
	d.P, d.Test = p, "p99/fisher"
	d.Why = fmt.Sprintf("p99 %+.1f%% with the median unchanged", 100*change)
	return VerdictRegression
}

// separated is +1 when every NEW sample exceeds every OLD sample by more than threshold
// (relative to OLD's largest), -1 when every NEW sample is below every OLD sample by more
// than threshold, else 0.
func separated(oldS, newS []float64, threshold float64) int {
	oMin, oMax := slices.Min(oldS), slices.Max(oldS)
	nMin, nMax := slices.Min(newS), slices.Max(newS)
	switch {
	case nMin > oMax && nMin-oMax > threshold*math.Abs(oMax):
		return 1
	case nMax < oMin && oMin-nMax > threshold*math.Abs(oMin):
		return -1
	}
	return 0
}

func sign(v float64) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// metricName identifies a metric across runs: name/backend=B/params in order.
func metricName(backend string, m *Measurement) string {
	name := m.Name + "/backend=" + backend
	if ps := paramString(m.Params, "/"); ps != "" {
		name += "/" + ps
	}
	return name
}

// Regressions returns the metrics that regressed beyond the threshold, and the exact
// figures that changed.
func (c *Comparison) Regressions() []Delta {
	return append(c.filter(VerdictRegression), c.filter(VerdictDifferent)...)
}

// Missing returns the metrics OLD has and NEW lacks.
func (c *Comparison) Missing() []Delta {
	return c.filter(VerdictMissing)
}

// Unjudged returns the gated metrics compare could not judge, and under Strict the
// drift it cannot explain.
func (c *Comparison) Unjudged() []Delta {
	if !c.Options.Strict {
		return c.filter(VerdictUnjudged)
	}
	return append(c.filter(VerdictUnjudged), c.filter(VerdictUnexplainedDrift)...)
}

func (c *Comparison) filter(v Verdict) []Delta {
	var out []Delta
	for _, d := range c.Deltas {
		if d.Verdict == v {
			out = append(out, d)
		}
	}
	return out
}

// listDeltas names up to five deltas with their reason.
func listDeltas(ds []Delta) string {
	var names []string
	for i, d := range ds {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(ds)-i))
			break
		}
		s := d.Metric
		if d.Why != "" {
			s += " (" + d.Why + ")"
		}
		names = append(names, s)
	}
	return strings.Join(names, ", ")
}

// Err is nil when the comparison passes, else an error naming what failed: regressions,
// missing metrics unless AllowMissing, unjudged gated metrics unless AllowUnjudged.
func (c *Comparison) Err() error {
	var msgs []string
	if r := c.Regressions(); len(r) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d metric(s) regressed beyond %s: %s", len(r), FormatThreshold(c.Options.Threshold), listDeltas(r)))
	}
	if m := c.Missing(); len(m) > 0 && !c.Options.AllowMissing {
		msgs = append(msgs, fmt.Sprintf("%d metric(s) of OLD missing from NEW (pass --allow-missing to accept): %s", len(m), listDeltas(m)))
	}
	if u := c.Unjudged(); len(u) > 0 && !c.Options.AllowUnjudged {
		msgs = append(msgs, fmt.Sprintf("%d gated metric(s) cannot be judged (pass --allow-unjudged to accept): %s", len(u), listDeltas(u)))
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("compare: %s", strings.Join(msgs, "; "))
}

// Write prints the comparison as a table: metric, old and new medians with their p99
// and max, change, p-value (and the rule that gave it), drift factor and verdict, then
// the reasons of failing verdicts and a one-line conclusion.
func (c *Comparison) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tOLD p50 ±ci n\tNEW p50 ±ci n\tDELTA\tOLD p99/max\tNEW p99/max\tP (test)\tSEES\tDRIFT\tVERDICT")
	for _, d := range c.Deltas {
		oldCol, newCol, delta, oldTail, newTail, p, drift := "—", "—", "", "—", "—", "", ""
		if d.Old != nil {
			oldCol = fmt.Sprintf("%s ±%s n=%d", formatValue(d.Old.P50, d.Unit), spread(d.Old), d.Old.N)
			oldTail = formatValue(d.Old.P99, d.Unit) + "/" + formatValue(d.Old.Max, d.Unit)
		}
		if d.New != nil {
			newCol = fmt.Sprintf("%s ±%s n=%d", formatValue(d.New.P50, d.Unit), spread(d.New), d.New.N)
			newTail = formatValue(d.New.P99, d.Unit) + "/" + formatValue(d.New.Max, d.Unit)
		}
		if d.Old != nil && d.New != nil {
			delta = fmt.Sprintf("%+.1f%%", 100*d.Change)
		}
		switch {
		case !math.IsNaN(d.P):
			p = fmt.Sprintf("%.3g (%s)", d.P, d.Test)
		case d.Test != "":
			p = "(" + d.Test + ")"
		}
		if d.Drift != 1 && d.Drift != 0 {
			drift = fmt.Sprintf("×%.2f", d.Drift)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Metric, oldCol, newCol, delta, oldTail, newTail, p, seesString(d.Detectable), drift, d.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	counts := map[Verdict]int{}
	for _, d := range c.Deltas {
		counts[d.Verdict]++
		if d.Why != "" && d.Verdict != VerdictSame {
			fmt.Fprintf(w, "%s: %s: %s\n", d.Verdict, d.Metric, d.Why)
		}
	}
	for _, d := range c.Deltas {
		if d.Informational != "" {
			fmt.Fprintf(w, "INFORMATIONAL (shown, not gated): %s: %s\n", d.Metric, d.Informational)
		}
	}
	var parts []string
	for _, v := range []Verdict{VerdictRegression, VerdictDifferent, VerdictUnjudged, VerdictUnexplainedDrift, VerdictWorse, VerdictDrift, VerdictBetter, VerdictChanged, VerdictSame, VerdictMissing, VerdictNew} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "%s\n", c.Drift.summary())
	verdict := "PASS"
	if c.Err() != nil {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "\n%s: %s (threshold %s, alpha %g; Mann-Whitney U with >= %d samples a side, pooled log-t or separation below; \"~\" only where the test sees the threshold with %d%% power (SEES: the smallest change it sees); distributions Holm-corrected at %g)\n",
		verdict, strings.Join(parts, ", "), FormatThreshold(c.Options.Threshold), c.Options.Alpha, c.Options.MinSamples, int(100*DetectPower), c.Options.FitAlpha)
	return err
}

// seesString prints the SEES column: the smallest change the cell's test sees ("±12%"),
// "any" for an exact figure, "none" when it sees none, "" where no threshold applies.
func seesString(v float64) string {
	switch {
	case math.IsNaN(v):
		return ""
	case v == 0:
		return "any"
	case math.IsInf(v, 1):
		return "none"
	}
	return fmt.Sprintf("±%.0f%%", 100*v)
}

// spread is the half-width of the 95% CI relative to the median, as benchstat prints it.
func spread(s *stats.Summary) string {
	if s.N < 2 || s.P50 == 0 {
		return "∞"
	}
	return fmt.Sprintf("%.0f%%", 100*(s.CI95High-s.CI95Low)/2/math.Abs(s.P50))
}

// ParseThreshold parses a threshold such as "10%", "2.5%" or "10" (percent either way)
// into a fraction (0.10). It refuses negative values and values of 1000% or more.
func ParseThreshold(s string) (float64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("threshold %q: want a percentage such as 10%%", s)
	}
	if v < 0 || v >= 1000 {
		return 0, fmt.Errorf("threshold %q: want a percentage between 0%% and 1000%%", s)
	}
	return v / 100, nil
}

// FormatThreshold prints a fraction as a percentage ("10%").
func FormatThreshold(f float64) string {
	return strconv.FormatFloat(f*100, 'f', -1, 64) + "%"
}

// minPooledDF is the fewest degrees of freedom of a pooled variance the pooled rule uses.
const minPooledDF = 3

// pooledNoise holds the noise of log samples pooled per declaration and backend over
// both runs: the pooled rule takes relative noise alike across the sizes of a figure.
type pooledNoise map[string]stats.LogNoise

func poolKey(d Metric, backend string) string {
	return d.Measurement + "{" + paramString(d.Match, ",") + "}/" + backend
}

// newPooledNoise pools the log samples of every mcell with 2 or more positive samples,
// per declaration and backend, over both runs.
func newPooledNoise(oldCells, newCells []mcell, decl func(mcell) Metric) pooledNoise {
	p := pooledNoise{}
	for _, cl := range slices.Concat(oldCells, newCells) {
		k := poolKey(decl(cl), cl.backend)
		n := p[k]
		n.Add(cl.m.Samples)
		p[k] = n
	}
	return p
}

func (p pooledNoise) of(d Metric, backend string) stats.LogNoise { return p[poolKey(d, backend)] }

// fitP returns the chi-square p-value of a distribution: recorded in Extra, else
// recomputed for uniform shares.
func fitP(m *Measurement) (float64, bool) {
	if p, ok := m.Extra["p_value"]; ok && !math.IsNaN(p) {
		return p, true
	}
	if m.Params["expected"] != "uniform" || len(m.Samples) < 2 {
		return 0, false
	}
	counts := make([]int, len(m.Samples))
	for i, v := range m.Samples {
		counts[i] = int(v)
	}
	_, _, p, err := stats.ChiSquareGOF(counts, stats.Uniform(len(counts)))
	return p, err == nil
}

// judgeFits judges the distributions deltas[fits]: each side's p-values Holm-corrected
// over the distributions judged; a misfit in NEW regresses (a fit in OLD or not).
func judgeFits(deltas []Delta, fits []int, oldBy, newBy map[string]mcell, alpha float64) {
	var judged []int
	var oldPs, newPs []float64
	for _, i := range fits {
		d := &deltas[i]
		om, nm := oldBy[d.Metric].m, newBy[d.Metric].m
		op, ok1 := fitP(om)
		np, ok2 := fitP(nm)
		minN := max(2, d.Decl.MinSamples)
		if !ok1 || !ok2 || len(om.Samples) < minN || len(nm.Samples) < minN {
			d.Verdict = VerdictSame
			if d.Decl.Gated {
				d.Verdict, d.Why = VerdictUnjudged, "no chi-square p-value on "+map[bool]string{true: "NEW", false: "OLD"}[ok1]
			}
			continue
		}
		judged = append(judged, i)
		oldPs, newPs = append(oldPs, op), append(newPs, np)
	}
	oldRej, newRej := stats.Holm(oldPs, alpha), stats.Holm(newPs, alpha)
	for k, i := range judged {
		d := &deltas[i]
		d.P, d.Test = newPs[k], fmt.Sprintf("chi-square/holm m=%d", len(judged))
		switch {
		case newRej[k] && !oldRej[k] && d.Decl.Gated:
			d.Verdict = VerdictRegression
			d.Why = fmt.Sprintf("fit p=%.3g in OLD, misfit p=%.3g in NEW (Holm over %d distributions at %g)", oldPs[k], newPs[k], len(judged), alpha)
		case newRej[k] && !oldRej[k]:
			d.Verdict = VerdictWorse
		case oldRej[k] && !newRej[k]:
			d.Verdict = VerdictBetter
		case newRej[k] && d.Decl.Gated:
			// A misfit in NEW is a selection that does not follow its shares, whether or
			// not OLD had the same bug.
			d.Verdict = VerdictRegression
			d.Why = fmt.Sprintf("misfit p=%.3g in NEW, and p=%.3g in OLD: a misfit in both runs is still a misfit (Holm over %d distributions at %g)", newPs[k], oldPs[k], len(judged), alpha)
		case newRej[k]:
			d.Verdict = VerdictWorse
		default:
			d.Verdict = VerdictSame
		}
	}
}
