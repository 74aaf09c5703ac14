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
// each size of the run. It selects measurements by name and parameters (pooling the
// samples of every measurement it selects for one backend and size, e.g. the lookups of
// the first, middle and last Service), and reads one statistic of the pooled samples.
type question struct {
	// Title names the figure for readers ("full sync").
	Title string
	// Names are the measurement names the question reads (the first one a run has wins,
	// so newer and older names of one figure can share a row).
	Names []string
	// Match holds parameters a measurement must have; Exclude parameters it must not.
	Match, Exclude map[string]string
	// Stat is the statistic compared: "p50" or "p99".
	Stat string
	// Better is the direction used when the results declare none for the measurement
	// (files written before declarations existed): the unit's rule, and lower for the
	// kernel memory that the unit rule leaves undirected.
	Better Better
}

// questions are the rows of the answers table, in the order a reader of a comparison
// asks them: how long syncs take, what traffic sees, what the rules hold in memory.
var questions = []question{
	{Title: "full sync", Names: []string{MeasureSync}, Match: map[string]string{"kind": "full"}, Stat: "p50", Better: LowerIsBetter},
	{Title: "partial sync (one Service changed)", Names: []string{MeasureSync}, Match: map[string]string{"kind": "partial"}, Stat: "p50", Better: LowerIsBetter},
	{Title: "first-packet latency p50", Names: []string{MeasureLookup}, Exclude: map[string]string{"position": "established"}, Stat: "p50", Better: LowerIsBetter},
	{Title: "first-packet latency p99", Names: []string{MeasureLookup}, Exclude: map[string]string{"position": "established"}, Stat: "p99", Better: LowerIsBetter},
	{Title: "programming latency p50", Names: []string{MeasureProgrammingLatency}, Stat: "p50", Better: LowerIsBetter},
	{Title: "programming latency p99", Names: []string{MeasureProgrammingLatency}, Stat: "p99", Better: LowerIsBetter},
	{Title: "new connections per second", Names: []string{MeasureThroughputConnections, MeasureThroughput}, Stat: "p50", Better: HigherIsBetter},
	{Title: "kernel memory of the rules", Names: []string{MeasureRulesMemory}, Stat: "p50", Better: LowerIsBetter},
}

// MeasureRulesMemory is the kernel memory the rules of a full sync hold (unreclaimable
// slab plus vmalloc growth since a settled baseline, host-wide); Params "services".
// Unit "bytes".
const MeasureRulesMemory = "rules-memory"

// selects reports whether q reads m.
func (q question) selects(m *Measurement, name string) bool {
	if m.Name != name || !m.Measured() {
		return false
	}
	for k, v := range q.Match {
		if m.Params[k] != v {
			return false
		}
	}
	for k, v := range q.Exclude {
		if m.Params[k] == v {
			return false
		}
	}
	return true
}

// standing is one backend's pooled samples for one question and size.
type standing struct {
	Backend string
	Unit    string
	Value   float64 // the question's statistic
	Summary stats.Summary
}

// answer is one cell of the answers table: the figures of every backend that measured
// it, best first, and the direction that ranked them.
type answer struct {
	Standings []standing
	Better    Better
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
	Question question
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
// results declare for the measurement (else the question's).
func answers(r *Results) answersTable {
	var t answersTable
	sizeSet := map[string]bool{}
	type key struct{ q, size, backend string }
	pooled := map[key][]float64{}
	units := map[key]string{}
	better := map[string]Better{}
	for _, q := range questions {
		name := ""
		for _, n := range q.Names { // the first name the run has
			if slices.ContainsFunc(points(r), func(p point) bool { return q.selects(p.m, n) }) {
				name = n
				break
			}
		}
		if name == "" {
			continue
		}
		better[q.Title] = q.Better
		for _, p := range points(r) {
			if !q.selects(p.m, name) {
				continue
			}
			if d, ok := declared(r, p.m); ok {
				better[q.Title] = d.Better
			}
			size := p.m.Params["services"]
			sizeSet[size] = true
			k := key{q.Title, size, p.backend}
			pooled[k] = append(pooled[k], p.m.Samples...)
			units[k] = p.m.Unit
		}
	}
	t.Sizes = slices.SortedFunc(maps.Keys(sizeSet), compareSizes)
	for _, q := range questions {
		if _, ok := better[q.Title]; !ok {
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
				a.Standings = append(a.Standings, standing{Backend: b, Unit: units[k], Value: statOf(s, q.Stat), Summary: s})
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
			row.Cells = append(row.Cells, a)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// declared returns the declaration r holds for m (none in files written before
// declarations existed).
func declared(r *Results, m *Measurement) (Metric, bool) {
	return MetricOf(r.Metrics, m)
}

// betterOf is the direction of m: declared in r, else the direction of the question
// that reads it (kernel memory: lower), else the unit's rule (time: lower, rates:
// higher, counts and bytes: none).
func betterOf(r *Results, m *Measurement) Better {
	if d, ok := declared(r, m); ok {
		return d.Better
	}
	for _, q := range questions {
		if slices.ContainsFunc(q.Names, func(n string) bool { return q.selects(m, n) }) {
			return q.Better
		}
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
