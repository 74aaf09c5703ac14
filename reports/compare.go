package reports

import (
	"fmt"
	"io"
	"maps"
	"math"
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
	// Alpha is the significance level of the Mann-Whitney U test; 0 means 0.05.
	Alpha float64
	// MinSamples is the number of samples each side needs before a difference can be
	// called significant; 0 means 4. Below it the verdict is "~" (unknown).
	MinSamples int
	// AllowMissing lets metrics present in OLD but absent from NEW pass. By default they
	// fail the comparison: a benchmark that silently stopped running is a regression of
	// the bench.
	AllowMissing bool
}

// Verdict is the outcome of one metric's comparison.
type Verdict string

// Verdicts.
const (
	// VerdictSame means no significant difference (or not enough samples to tell): "~".
	VerdictSame Verdict = "~"
	// VerdictBetter is a significant change in the good direction.
	VerdictBetter Verdict = "better"
	// VerdictWorse is a significant change in the bad direction, within the threshold.
	VerdictWorse Verdict = "worse"
	// VerdictRegression is a significant change in the bad direction beyond the
	// threshold: it fails the comparison.
	VerdictRegression Verdict = "REGRESSION"
	// VerdictChanged is a significant change of a unit without a good direction (counts,
	// bytes): reported, never a failure.
	VerdictChanged Verdict = "changed"
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
	// Old and New are the summaries (nil when the side lacks the metric).
	Old, New *stats.Summary
	// Change is (new - old) / old of the medians (0 when a side is missing or old is 0).
	Change float64
	// P is the Mann-Whitney two-sided p-value, NaN when not computed (too few samples,
	// or a side missing).
	P float64
	// Verdict is the outcome.
	Verdict Verdict
}

// Comparison is the outcome of Compare.
type Comparison struct {
	// Options are the options used (defaults filled in).
	Options CompareOptions
	// Deltas has one entry per metric, in OLD's order, then metrics only NEW has.
	Deltas []Delta
	// Notes are warnings that do not change the verdict, such as a backend whose run
	// labels (its options) differ between the runs.
	Notes []string
}

// Compare matches every metric of old with new (by measurement name, backend and params),
// and judges each with the Mann-Whitney U test on the raw samples (alpha 0.05; fewer than
// 4 samples on a side cannot be significant) and the threshold on the change of medians.
// For time (unit "s") larger is worse; for rates ("1/s") smaller is worse; counts and bytes
// are reported but never fail. Distributions are skipped: their samples are per-endpoint
// counts, not repeated measurements.
func Compare(oldRun, newRun *Results, opts CompareOptions) *Comparison {
	if opts.Alpha == 0 {
		opts.Alpha = 0.05
	}
	if opts.MinSamples == 0 {
		opts.MinSamples = 4
	}
	type entry struct {
		name string
		m    *Measurement
	}
	index := func(r *Results) ([]entry, map[string]*Measurement) {
		var order []entry
		byName := map[string]*Measurement{}
		for _, p := range points(r) {
			if p.m.Name == MeasureDistribution {
				continue
			}
			name := metricName(p.backend, p.m)
			if _, dup := byName[name]; dup {
				continue // the first of duplicate points wins, as in the reports
			}
			byName[name] = p.m
			order = append(order, entry{name, p.m})
		}
		return order, byName
	}
	oldOrder, _ := index(oldRun)
	newOrder, newBy := index(newRun)
	c := &Comparison{Options: opts}
	seen := map[string]bool{}
	for _, e := range oldOrder {
		seen[e.name] = true
		oldSum := e.m.Summary
		d := Delta{Metric: e.name, Unit: e.m.Unit, Old: &oldSum, P: math.NaN()}
		nm, ok := newBy[e.name]
		if !ok {
			d.Verdict = VerdictMissing
			c.Deltas = append(c.Deltas, d)
			continue
		}
		ns := nm.Summary
		d.New = &ns
		judge(&d, e.m.Samples, nm.Samples, opts)
		c.Deltas = append(c.Deltas, d)
	}
	for _, e := range newOrder {
		if seen[e.name] {
			continue
		}
		ns := e.m.Summary
		c.Deltas = append(c.Deltas, Delta{Metric: e.name, Unit: e.m.Unit, New: &ns, P: math.NaN(), Verdict: VerdictNew})
	}
	c.Notes = labelNotes(oldRun, newRun)
	return c
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

// judge fills Change, P and Verdict of a metric both runs have.
func judge(d *Delta, oldSamples, newSamples []float64, opts CompareOptions) {
	d.Verdict = VerdictSame
	if d.Old.P50 != 0 {
		d.Change = (d.New.P50 - d.Old.P50) / math.Abs(d.Old.P50)
	}
	if len(oldSamples) < opts.MinSamples || len(newSamples) < opts.MinSamples {
		return
	}
	_, p, err := stats.MannWhitneyU(oldSamples, newSamples)
	if err != nil {
		return
	}
	d.P = p
	if p >= opts.Alpha || d.Change == 0 {
		return
	}
	lower, directed := lowerIsBetter(d.Unit)
	if !directed {
		d.Verdict = VerdictChanged
		return
	}
	worse := d.Change > 0 == lower
	switch {
	case !worse:
		d.Verdict = VerdictBetter
	case math.Abs(d.Change) > opts.Threshold:
		d.Verdict = VerdictRegression
	default:
		d.Verdict = VerdictWorse
	}
}

// metricName identifies a metric across runs: name/backend=B/params in order.
func metricName(backend string, m *Measurement) string {
	name := m.Name + "/backend=" + backend
	if ps := paramString(m.Params, "/"); ps != "" {
		name += "/" + ps
	}
	return name
}

// Regressions returns the metrics that regressed beyond the threshold.
func (c *Comparison) Regressions() []Delta {
	return c.filter(VerdictRegression)
}

// Missing returns the metrics OLD has and NEW lacks.
func (c *Comparison) Missing() []Delta {
	return c.filter(VerdictMissing)
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

// Err is nil when the comparison passes, else an error naming what failed: regressions
// beyond the threshold, and missing metrics unless AllowMissing.
func (c *Comparison) Err() error {
	var msgs []string
	if r := c.Regressions(); len(r) > 0 {
		names := make([]string, len(r))
		for i, d := range r {
			names[i] = fmt.Sprintf("%s (%+.1f%%, p=%.3g)", d.Metric, 100*d.Change, d.P)
		}
		msgs = append(msgs, fmt.Sprintf("%d metric(s) regressed beyond %s: %s", len(r), FormatThreshold(c.Options.Threshold), strings.Join(names, ", ")))
	}
	if m := c.Missing(); len(m) > 0 && !c.Options.AllowMissing {
		var names []string
		for i, d := range m {
			if i == 5 {
				names = append(names, fmt.Sprintf("and %d more", len(m)-i))
				break
			}
			names = append(names, d.Metric)
		}
		msgs = append(msgs, fmt.Sprintf("%d metric(s) of OLD missing from NEW (pass --allow-missing to accept): %s", len(m), strings.Join(names, ", ")))
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("compare: %s", strings.Join(msgs, "; "))
}

// Write prints the comparison as a table: metric, old and new medians, change, p-value
// and verdict, then a one-line conclusion.
func (c *Comparison) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tOLD\tNEW\tDELTA\tP\tVERDICT")
	for _, d := range c.Deltas {
		oldCol, newCol, delta, p := "-", "-", "", ""
		if d.Old != nil {
			oldCol = fmt.Sprintf("%s ±%s n=%d", formatValue(d.Old.P50, d.Unit), spread(d.Old), d.Old.N)
		}
		if d.New != nil {
			newCol = fmt.Sprintf("%s ±%s n=%d", formatValue(d.New.P50, d.Unit), spread(d.New), d.New.N)
		}
		if d.Old != nil && d.New != nil {
			delta = fmt.Sprintf("%+.1f%%", 100*d.Change)
		}
		if !math.IsNaN(d.P) {
			p = fmt.Sprintf("%.3g", d.P)
		} else if d.Old != nil && d.New != nil {
			p = fmt.Sprintf("n<%d", c.Options.MinSamples)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Metric, oldCol, newCol, delta, p, d.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	counts := map[Verdict]int{}
	for _, d := range c.Deltas {
		counts[d.Verdict]++
	}
	var parts []string
	for _, v := range []Verdict{VerdictRegression, VerdictWorse, VerdictBetter, VerdictChanged, VerdictSame, VerdictMissing, VerdictNew} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	verdict := "PASS"
	if c.Err() != nil {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "\n%s: %s (threshold %s, alpha %g, Mann-Whitney U on raw samples)\n", verdict, strings.Join(parts, ", "), FormatThreshold(c.Options.Threshold), c.Options.Alpha)
	return err
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
