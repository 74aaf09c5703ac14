package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/reports"
)

// newReportCmd is `kpbench report DIR...`: redraw the reports of a saved run, or merge
// several runs (a native run and a microVM ladder, a kernel matrix) into one report.
func newReportCmd() *cobra.Command {
	var out string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "report DIR|FILE... [--out DIR]",
		Short: "Redraw the reports of a saved run, or merge several runs into one report",
		Long: `report loads DIR/results.json (or the results file given) and writes, next to it or
into --out, everything drawn from it: bench.txt (Go benchmark format, for benchstat),
one CSV per measurement, junit.xml, plots/*.png and *.svg, and report.html, a
self-contained page that answers first (which backend was best at each size, by how
much), then shows the charts, then the long tables. Nothing is rerun and results.json
is not modified. It prints a short summary and the path of report.html.

With several results (several DIR or FILE arguments, or a DIR without results.json
whose subdirectories hold results, as a kernel matrix OUT/<kernel>/ does), report merges
them into one report.html (and its plots) in --out (required for several arguments;
a kernel matrix directory alone is written into itself): each run in its own section
labelled with its environment, ratios only within a section, and kernel against kernel
for a scenario run on several kernels. The runs' own directories are not touched.

Exit status: 0 written, 2 the results cannot be read or --out is missing, 3 a report
could not be written.`,
		Example: `  kpbench report runs/2026-11-30-perf-ladder
  kpbench report results.json --out /tmp/report
  kpbench report out/bench out/vm-ladder --out out/merged
  kpbench report out/kernel-matrix
  benchstat -col /backend -row /services runs/2026-11-30-perf-ladder/bench.txt`,
		Args: minimumArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcs, err := reports.LoadSources(args...)
			if err != nil {
				return usageError{err}
			}
			w := cmd.OutOrStdout()
			if len(args) == 1 && len(srcs) == 1 {
				return reportOne(cmd, args[0], out, quiet, srcs[0].Results)
			}
			dir := out
			if dir == "" {
				if len(args) > 1 {
					return usageError{errors.New("report: several results are merged into one report: name its directory with --out")}
				}
				dir = args[0]
			}
			if _, err := reports.WriteMerged(dir, srcs); err != nil {
				return fmt.Errorf("report: %w", err)
			}
			if !quiet {
				for _, s := range srcs {
					fmt.Fprintf(w, "== %s\n", s.Path)
					if err := reports.Summary(w, s.Results); err != nil {
						return err
					}
					fmt.Fprintln(w)
				}
			}
			fmt.Fprintln(w, filepath.Join(dir, reports.HTMLFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the reports into this directory instead of the run's (required to merge several)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the path of report.html")
	return cmd
}

// reportOne redraws every report of one run, as `kpbench report DIR` always did.
func reportOne(cmd *cobra.Command, arg, out string, quiet bool, r *reports.Results) error {
	dir := out
	if dir == "" {
		dir = arg
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
	}
	if _, err := reports.WriteReports(dir, r); err != nil {
		return fmt.Errorf("report %s: %w", arg, err)
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
}
