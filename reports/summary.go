package reports

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// summaryOutliers is how many outliers the terminal summary lists.
const summaryOutliers = 10

// Summary writes a plain-text summary of r for the terminal: first the answers (for each
// size, the best backend at each figure and by how much), then every metric's median per
// backend with its p99 and max, samples far from the rest with their step and time, the
// distributions' fits and the case counts per backend. A figure that was not measured
// shows "—".
func Summary(w io.Writer, r *Results) error {
	bs := backends(r)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s (%s)\n", cmpOr(r.Scenario, "run"), envLabel(r.Environment))
	for _, l := range r.RunLabels() {
		fmt.Fprintf(tw, "run labels of %s\n", l)
	}
	if hasIPVS([]Source{{Results: r}}) {
		fmt.Fprintln(tw, "note: "+KEP5495Note)
	}
	at := answers(r)
	for si, size := range at.Sizes {
		fmt.Fprintf(tw, "\nAT %s\tBEST\t\tBY HOW MUCH\n", strings.ToUpper(sizeLabel(size)))
		for _, row := range at.Rows {
			a := row.Cells[si]
			best := a.Best()
			if best == nil {
				fmt.Fprintf(tw, "  %s\t—\t\t\n", row.Question.Title)
				continue
			}
			c := answerCell(a)
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", row.Question.Title, c.Winner, c.Value, joinNonEmpty("; ", c.Vs, c.Last, c.Missing))
		}
	}
	rows := comparisonRows(r)
	if len(rows) > 0 {
		fmt.Fprintf(tw, "\nMETRIC: MEDIAN | P99 | MAX\tPARAMS\t%s\tBEST\n", strings.ToUpper(strings.Join(bs, "\t")))
		for _, row := range rows {
			fmt.Fprintf(tw, "%s\t%s", row.Name, row.Params)
			for _, b := range bs {
				fmt.Fprintf(tw, "\t%s", row.cellText(b))
			}
			fmt.Fprintf(tw, "\t%s\n", row.ratioText())
		}
	}
	if gs := groupOutliers(answeredOutliers(Outliers(r))); len(gs) > 0 {
		fmt.Fprintf(tw, "\nSAMPLES FAR FROM THE REST (more than %dx their median; costliest first)\n", OutlierFactor)
		for i, g := range gs {
			if i == summaryOutliers {
				fmt.Fprintln(tw, countLine(i, len(gs)))
				break
			}
			fmt.Fprintln(tw, g.String())
		}
	}
	for _, p := range points(r) {
		if d, ok := metricOf(r, p.m); ok && d.Test == TestFit {
			if pv, ok := p.m.Extra["p_value"]; ok {
				fmt.Fprintf(tw, "%s\t%s\t%s: chi2 %.3g, p = %.3g\n", p.m.Name, paramString(p.m.Params, " "), p.backend, p.m.Extra["chi2"], pv)
			}
		}
	}
	if len(r.Cases) > 0 {
		fmt.Fprintln(tw, "\nCASES\tPASS\tFAIL\tSKIP")
		for _, b := range bs {
			pass, fail, skip := countCases(r.Cases, b)
			if pass+fail+skip > 0 {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", b, pass, fail, skip)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}
