package reports

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"kpbench.dev/kpbench/reports/stats"
)

// A question is one row of the answers table: which backend did best at one figure, for
// each size of the run. A measurement declares its questions (Measure); a question selects
// that measurement's measurements by parameters (pooling the samples of every
// measurement it selects for one backend and size, e.g. the lookups of the first, middle
// and last Service), and reads one statistic of the pooled samples.
type question struct {
	// Title names the figure for readers ("full sync"). Measurements that declare a
	// question of the same title share its row: the first of them, in Measures order,
	// that a run has answers it (so a newer and an older name of one figure share a row).
	Title string
	// Match holds parameters a measurement must have; Exclude parameters it must not.
	Match, Exclude map[string]string
	// Stat is the statistic compared: "p50" or "p99".
	Stat string
	// Pooling, when set, says what the row pools, under the answers of report.html.
	Pooling string
}

// askedQuestion is a question with the measurement it reads.
type askedQuestion struct {
	question
	measurement string
}

// questions returns the rows of the answers table, in order: each title once, with
// the measurements that may answer it, in Measures order.
func questions() []questionRow {
	var rows []questionRow
	for _, m := range Measures() {
		for _, q := range m.questions {
			i := slices.IndexFunc(rows, func(r questionRow) bool { return r.Title == q.Title })
			if i < 0 {
				rows = append(rows, questionRow{Title: q.Title})
				i = len(rows) - 1
			}
			rows[i].asked = append(rows[i].asked, askedQuestion{q, m.Name})
		}
	}
	return rows
}

// questionRow is one row of the answers table: its title and the questions that may
// answer it, the first a run has winning.
type questionRow struct {
	Title string
	asked []askedQuestion
}

// selects reports whether q reads m.
func (q askedQuestion) selects(m *Measurement) bool {
	if m.Name != q.measurement || !m.Measured() || !hasParams(m, q.Match) {
		return false
	}
	for k, v := range q.Exclude {
		if m.Params[k] == v {
			return false
		}
	}
	return true
}

// reads returns whether any question of the row reads m.
func (row questionRow) reads(m *Measurement) bool {
	return slices.ContainsFunc(row.asked, func(q askedQuestion) bool { return q.selects(m) })
}

// standing is one backend's pooled samples for one question and size.
type standing struct {
	Backend string
	Unit    string
	Value   float64 // the question's statistic
	Summary stats.Summary
	samples []float64
}

// answer is one cell of the answers table: the figures of every backend that measured
// it, best first, and the direction that ranked them.
type answer struct {
	Standings []standing
	Better    Better
	// Significant is true when the winner's lead over the runner-up is significant at
	// their sample counts (significantLead); otherwise the answer names no winner.
	Significant bool
	// Missing are the backends that measured this figure at another size of the run but
	// not at this one (not measured, or a figure that is no measurement).
	Missing []string
}

// Best is the winner, or nil when nothing was measured.
func (a answer) Best() *standing {
	if len(a.Standings) == 0 {
		return nil
	}
	return &a.Standings[0]
}

// Ratio is how many times better the winner is than the runner-up (>= 1), and false when
// fewer than two backends measured it, the metric has no direction, or a figure is not
// positive (a ratio against zero means nothing).
func (a answer) Ratio() (float64, bool) {
	return a.ratioTo(1)
}

// Spread is the ratio between the winner and the last backend.
func (a answer) Spread() (float64, bool) {
	return a.ratioTo(len(a.Standings) - 1)
}

func (a answer) ratioTo(i int) (float64, bool) {
	if len(a.Standings) < 2 || i < 1 || i >= len(a.Standings) || a.Better == NoDirection {
		return 0, false
	}
	best, other := a.Standings[0].Value, a.Standings[i].Value
	if best <= 0 || other <= 0 {
		return 0, false
	}
	if a.Better == LowerIsBetter {
		return other / best, true
	}
	return best / other, true
}

// answerRow is one question across the sizes of a run.
type answerRow struct {
	// Question is the question that answered the row (of the first measurement of the
	// row the run has).
	Question askedQuestion
	// Cells is indexed like answersTable.Sizes.
	Cells []answer
}

// answersTable answers "which backend, at which size, for what" for one run: a row per
// question that any backend measured, a column per size.
type answersTable struct {
	// Sizes are the Services counts of the run, increasing ("" when a figure has none).
	Sizes []string
	Rows  []answerRow
}

// answers computes the answers table of r. Figures are compared only within r (one
// environment), only among backends that measured the same figure, by the direction the
// results declare for the measurement (else kpbench's declaration of it).
func answers(r *Results) answersTable {
	var t answersTable
	sizeSet := map[string]bool{}
	type key struct{ q, size, backend string }
	pooled := map[key][]float64{}
	units := map[key]string{}
	better := map[string]Better{}
	asked := map[string]askedQuestion{}
	rows := questions()
	for _, row := range rows {
		i := slices.IndexFunc(row.asked, func(q askedQuestion) bool { // the first the run has
			return slices.ContainsFunc(points(r), func(p point) bool { return q.selects(p.m) })
		})
		if i < 0 {
			continue
		}
		q := row.asked[i]
		asked[q.Title] = q
		for _, p := range points(r) {
			if !q.selects(p.m) {
				continue
			}
			better[q.Title] = betterOf(r, p.m)
			size := p.m.Params["services"]
			sizeSet[size] = true
			k := key{q.Title, size, p.backend}
			pooled[k] = append(pooled[k], p.m.Samples...)
			units[k] = p.m.Unit
		}
	}
	t.Sizes = slices.SortedFunc(maps.Keys(sizeSet), compareSizes)
	for _, qr := range rows {
		q, ok := asked[qr.Title]
		if !ok {
			continue
		}
		row := answerRow{Question: q}
		for _, size := range t.Sizes {
			a := answer{Better: better[q.Title]}
			for _, b := range backends(r) {
				k := key{q.Title, size, b}
				if len(pooled[k]) == 0 {
					continue
				}
				s := Summarize(pooled[k])
				a.Standings = append(a.Standings, standing{Backend: b, Unit: units[k], Value: statOf(s, q.Stat), Summary: s, samples: pooled[k]})
			}
			for _, b := range backends(r) {
				if len(pooled[key{q.Title, size, b}]) > 0 {
					continue
				}
				for _, other := range t.Sizes {
					if len(pooled[key{q.Title, other, b}]) > 0 {
						a.Missing = append(a.Missing, b)
						break
					}
				}
			}
			slices.SortStableFunc(a.Standings, func(x, y standing) int {
				switch a.Better {
				case LowerIsBetter:
					return cmp.Compare(x.Value, y.Value)
				case HigherIsBetter:
					return cmp.Compare(y.Value, x.Value)
				}
				return 0
			})
			if len(a.Standings) >= 2 {
				var noise stats.LogNoise
				for k, v := range pooled {
					if k.q == q.Title {
						noise.Add(v)
					}
				}
				a.Significant = significantLead(a.Standings[0], a.Standings[1], q.Stat, a.Better, noise)
			}
			row.Cells = append(row.Cells, a)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// betterOf is the direction of m: declared in r, else as kpbench declared it for files
// without declarations (LegacyMetrics), else as it declares it today, else the unit's
// rule (time: lower, rates: higher, counts and bytes: none).
func betterOf(r *Results, m *Measurement) Better {
	if d, ok := metricOf(r, m); ok {
		return d.Better
	}
	lower, ok := lowerIsBetter(m.Unit)
	switch {
	case !ok:
		return NoDirection
	case lower:
		return LowerIsBetter
	}
	return HigherIsBetter
}

// answerAlpha is the significance level of the answers table's tests.
const answerAlpha = 0.05

// significantLead reports whether best leads next significantly at their sample counts:
// for a median, the Mann-Whitney U test with 4 or more samples a side, else the t-test
// on logs with the noise pooled over the row's sizes and backends (3 or more degrees of
// freedom); for a p99, 50 or more samples a side and significantly more of next's
// samples beyond best's p99 than best's own (Fisher's exact test). One sample a side
// and nothing to pool with is never significant.
func significantLead(best, next standing, stat string, better Better, noise stats.LogNoise) bool {
	if better == NoDirection {
		return false
	}
	x, y := best.samples, next.samples
	switch stat {
	case "p99":
		if len(x) < 50 || len(y) < 50 {
			return false
		}
		beyond := func(s []float64) int {
			n := 0
			for _, v := range s {
				if (better == LowerIsBetter && v > best.Value) || (better == HigherIsBetter && v < best.Value) {
					n++
				}
			}
			return n
		}
		return stats.FisherGreater(beyond(y), len(y), beyond(x), len(x)) < answerAlpha
	case "p50":
		if len(x) >= 4 && len(y) >= 4 {
			_, p, err := stats.MannWhitneyU(x, y)
			return err == nil && p < answerAlpha
		}
		if noise.DF >= minPooledDF && stats.AllPositive(x) && stats.AllPositive(y) {
			p, _ := noise.TTest(x, y)
			return p < answerAlpha
		}
	}
	return false
}

// statOf reads a named statistic of s.
func statOf(s stats.Summary, stat string) float64 {
	switch stat {
	case "p90":
		return s.P90
	case "p99":
		return s.P99
	case "max":
		return s.Max
	case "mean":
		return s.Mean
	}
	return s.P50
}

// compareSizes orders "services" values numerically, the empty one last.
func compareSizes(a, b string) int {
	na, ea := strconv.ParseFloat(a, 64)
	nb, eb := strconv.ParseFloat(b, 64)
	switch {
	case ea != nil && eb != nil:
		return cmp.Compare(a, b)
	case ea != nil:
		return 1
	case eb != nil:
		return -1
	}
	return cmp.Compare(na, nb)
}

// sizeLabel renders a size for headings: "10,000 Services" (or "any size").
func sizeLabel(size string) string {
	n, err := strconv.Atoi(size)
	if err != nil {
		return "any size"
	}
	return groupThousands(n) + " Services"
}

// groupThousands prints n with thousands separators: 10000 -> "10,000".
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// comparative says how the winner beats another standing of unit: "faster" for times,
// "higher" for rates, "smaller" for sizes and counts.
func comparative(unit string, better Better) string {
	switch {
	case unit == UnitSeconds && better == LowerIsBetter:
		return "faster"
	case better == HigherIsBetter:
		return "higher"
	case better == LowerIsBetter:
		return "smaller"
	}
	return "apart"
}

// ratioString prints a ratio with two or three significant digits: "1.8x", "12x", "240x".
func ratioString(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "—"
	}
	if v >= 9.95 {
		return fmt.Sprintf("%.0fx", v)
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "x"
}
