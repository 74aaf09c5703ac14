package reports

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"kpbench.dev/kpbench/reports/stats"
)

// orderedKeys returns params' keys: the well-known ones first, then the rest sorted.
func orderedKeys(params map[string]string) []string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	// The well-known parameters come first, in this order; others follow sorted.
	order := []string{"services", "kind", "position", "endpoints", "expected"}
	rank := func(k string) int {
		if i := slices.Index(order, k); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
	})
	return keys
}

// paramString renders params as "k=v/k=v" in orderedKeys order.
func paramString(params map[string]string, sep string) string {
	var b strings.Builder
	for i, k := range orderedKeys(params) {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(k + "=" + params[k])
	}
	return b.String()
}

// point is one measurement with the backend that produced it.
type point struct {
	backend string
	m       *Measurement
}

// points flattens r's measurements in file order.
func points(r *Results) []point {
	var ps []point
	for i := range r.Runs {
		for j := range r.Runs[i].Measurements {
			ps = append(ps, point{r.Runs[i].Backend, &r.Runs[i].Measurements[j]})
		}
	}
	return ps
}

// backends returns the backends of r in first-seen order.
func backends(r *Results) []string {
	var bs []string
	for _, run := range r.Runs {
		if !slices.Contains(bs, run.Backend) {
			bs = append(bs, run.Backend)
		}
	}
	for _, c := range r.Cases {
		if !slices.Contains(bs, c.Backend) {
			bs = append(bs, c.Backend)
		}
	}
	return bs
}

// services returns the "services" parameter of m as a number, or false.
func services(m *Measurement) (float64, bool) {
	v, err := strconv.ParseFloat(m.Params["services"], 64)
	return v, err == nil && v > 0
}

// formatValue prints v in unit for people: seconds scaled to s/ms/µs/ns, rates and
// counts with SI prefixes, three significant digits.
func formatValue(v float64, unit string) string {
	switch unit {
	case UnitSeconds:
		a := math.Abs(v)
		switch {
		case a == 0:
			return "0 s"
		case a >= 1:
			return sig3(v) + " s"
		case a >= 1e-3:
			return sig3(v*1e3) + " ms"
		case a >= 1e-6:
			return sig3(v*1e6) + " µs"
		default:
			return sig3(v*1e9) + " ns"
		}
	case UnitBytes:
		return siValue(v, 1024, "B", "KiB", "MiB", "GiB")
	case UnitPerSecond:
		return siValue(v, 1000, "/s", "k/s", "M/s", "G/s")
	default:
		return siValue(v, 1000, "", "k", "M", "G")
	}
}

func siValue(v, base float64, units ...string) string {
	i := 0
	for math.Abs(v) >= base && i < len(units)-1 {
		v /= base
		i++
	}
	s := sig3(v)
	if units[i] == "" {
		return s
	}
	if strings.HasPrefix(units[i], "/") {
		return s + units[i]
	}
	return s + " " + units[i]
}

// sig3 prints v with three significant digits, without exponent for everyday magnitudes.
func sig3(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e6 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if a := math.Abs(v); a >= 1000 && a < 1e6 {
		return strconv.FormatFloat(v, 'f', 0, 64) // 1485 s, not 1.49e+03 s
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// lowerIsBetter tells the direction of a unit: true for time, false for rates, and
// ok=false for units where neither direction is better (counts, bytes).
func lowerIsBetter(unit string) (lower, ok bool) {
	switch unit {
	case UnitSeconds:
		return true, true
	case UnitPerSecond:
		return false, true
	}
	return false, false
}

// comparisonRow is one metric (measurement name and params) across the backends of a
// run: the summary of each backend, and the best and worst by the metric's direction.
type comparisonRow struct {
	Name, Params, Unit string
	// Values is the median per backend (absent when the backend lacks the metric).
	Values map[string]float64
	// Summaries is the summary per backend, for the tails (p99, max, n).
	Summaries map[string]stats.Summary
	// Better is the metric's direction (declared, else the unit's rule).
	Better Better
	// Best and Worst name the backends at each end; Ratio = how many times better the
	// best is than the worst (>= 1), 0 when fewer than two backends have the metric, the
	// metric has no direction, or a median is not positive.
	Best, Worst string
	Ratio       float64
	// Informational is the reason the scenario gave for not gating the figure (empty:
	// gated as declared).
	Informational string
}

// comparisonRows groups r's measurements by name and params (series excluded:
// Measure.Series are drawn, not tabulated) in first-seen order, sizes increasing
// within a measurement.
func comparisonRows(r *Results) []comparisonRow {
	var rows []comparisonRow
	idx := map[string]int{}
	series := seriesNames()
	for _, p := range points(r) {
		if series[p.m.Name] || !p.m.Measured() {
			continue
		}
		key := p.m.Name + "\x00" + paramString(p.m.Params, " ") + "\x00" + p.m.Unit
		i, ok := idx[key]
		if !ok {
			i = len(rows)
			idx[key] = i
			rows = append(rows, comparisonRow{Name: p.m.Name, Params: paramString(p.m.Params, " "), Unit: p.m.Unit,
				Values: map[string]float64{}, Summaries: map[string]stats.Summary{}, Better: betterOf(r, p.m)})
		}
		rows[i].Values[p.backend] = p.m.Summary.P50
		rows[i].Summaries[p.backend] = p.m.Summary
		rows[i].Informational = cmp.Or(rows[i].Informational, p.m.Informational)
	}
	// Group the rows by measurement (in first-seen order), sizes increasing.
	first := map[string]int{}
	for i, row := range rows {
		if _, ok := first[row.Name]; !ok {
			first[row.Name] = i
		}
	}
	size := func(params string) float64 {
		for f := range strings.FieldsSeq(params) {
			if v, ok := strings.CutPrefix(f, "services="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
		return 0
	}
	slices.SortStableFunc(rows, func(a, b comparisonRow) int {
		return cmp.Or(cmp.Compare(first[a.Name], first[b.Name]), cmp.Compare(size(a.Params), size(b.Params)))
	})
	for i := range rows {
		row := &rows[i]
		if row.Better == NoDirection {
			continue
		}
		lower := row.Better == LowerIsBetter
		for _, b := range backends(r) {
			v, has := row.Values[b]
			if !has {
				continue
			}
			if row.Best == "" || (lower && v < row.Values[row.Best]) || (!lower && v > row.Values[row.Best]) {
				row.Best = b
			}
			if row.Worst == "" || (lower && v > row.Values[row.Worst]) || (!lower && v < row.Values[row.Worst]) {
				row.Worst = b
			}
		}
		best, worst := row.Values[row.Best], row.Values[row.Worst]
		if len(row.Values) < 2 || row.Best == row.Worst || best <= 0 || worst <= 0 {
			row.Best, row.Worst = "", ""
			continue
		}
		if lower {
			row.Ratio = worst / best
		} else {
			row.Ratio = best / worst
		}
	}
	return rows
}

// ratioText renders a row's ratio, e.g. "nftables best, 4.9x faster than iptables".
func (row comparisonRow) ratioText() string {
	if row.Ratio == 0 {
		return ""
	}
	return fmt.Sprintf("%s best, %s %s than %s", row.Best, ratioString(row.Ratio), comparative(row.Unit, row.Better), row.Worst)
}

// cellText renders one backend's figure of a row for the terminal: "540 ms | 207 s |
// 211 s" (median, p99, max; one figure for a single sample), or "—" when it was not
// measured.
func (row comparisonRow) cellText(backend string) string {
	s, ok := row.Summaries[backend]
	if !ok || s.N == 0 {
		return "—"
	}
	if s.N == 1 || s.Min == s.Max {
		return formatValue(s.P50, row.Unit)
	}
	return formatValue(s.P50, row.Unit) + " | " + formatValue(s.P99, row.Unit) + " | " + formatValue(s.Max, row.Unit)
}
