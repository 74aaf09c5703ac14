package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/reports"
)

// newReportCmd is `kpbench report DIR`: redraw every report of a saved run.
func newReportCmd() *cobra.Command {
	var out string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "report DIR|FILE [--out DIR]",
		Short: "Redraw the reports of a saved run (bench.txt, CSV, junit.xml, plots, report.html)",
		Long: `report loads DIR/results.json (or the results file given) and writes, next to it or
into --out, everything drawn from it: bench.txt (Go benchmark format, for benchstat),
one CSV per measurement, junit.xml, plots/*.png and *.svg, and report.html, a
self-contained page. Nothing is rerun and results.json is not modified. It prints a short
summary and the path of report.html.

Exit status: 0 written, 2 the results cannot be read, 3 a report could not be written.`,
		Example: `  kpbench report runs/2026-11-30-perf-ladder
  kpbench report results.json --out /tmp/report
  benchstat -col /backend -row /services runs/2026-11-30-perf-ladder/bench.txt`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := reports.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			dir := out
			if dir == "" {
				dir = args[0]
				if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
					dir = filepath.Dir(dir)
				}
			}
			if _, err := reports.WriteReports(dir, r); err != nil {
				return fmt.Errorf("report %s: %w", args[0], err)
			}
			w := cmd.OutOrStdout()
			if !quiet {
				if err := reports.Summary(w, r); err != nil {
					return err
				}
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w, filepath.Join(dir, reports.HTMLFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the reports into this directory instead of the run's")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the path of report.html")
	return cmd
}
