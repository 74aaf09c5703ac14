package reports

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Summary writes a short plain-text table of r for the terminal: each metric's median
// per backend with the worst/best ratio, then the case counts per backend.
func Summary(w io.Writer, r *Results) error {
	bs := backends(r)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s (%s, %s %s, %d cores)\n", cmpOr(r.Scenario, "run"), r.Environment.Accelerator, r.Environment.Kernel, r.Environment.KernelRelease, r.Environment.Cores)
	for _, l := range r.RunLabels() {
		fmt.Fprintf(tw, "run labels of %s\n", l)
	}
	rows := comparisonRows(r)
	if len(rows) > 0 {
		fmt.Fprintf(tw, "METRIC\tPARAMS\t%s\tRATIO\n", strings.ToUpper(strings.Join(bs, "\t")))
		for _, row := range rows {
			fmt.Fprintf(tw, "%s\t%s", row.Name, row.Params)
			for _, b := range bs {
				v, ok := row.Values[b]
				if ok {
					fmt.Fprintf(tw, "\t%s", formatValue(v, row.Unit))
				} else {
					fmt.Fprint(tw, "\t-")
				}
			}
			fmt.Fprintf(tw, "\t%s\n", row.ratioText())
		}
	}
	for _, p := range points(r) {
		if p.m.Name == MeasureDistribution {
			if pv, ok := p.m.Extra["p_value"]; ok {
				fmt.Fprintf(tw, "distribution\t%s\t%s: chi2 %.3g, p = %.3g\n", paramString(p.m.Params, " "), p.backend, p.m.Extra["chi2"], pv)
			}
		}
	}
	if len(r.Cases) > 0 {
		fmt.Fprintln(tw, "\nCASES\tPASS\tFAIL\tSKIP")
		for _, b := range bs {
			var pass, fail, skip int
			for _, c := range r.Cases {
				if c.Backend != b {
					continue
				}
				switch c.Result {
				case CasePass:
					pass++
				case CaseFail:
					fail++
				case CaseSkip:
					skip++
				}
			}
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
