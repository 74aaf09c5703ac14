package main

import (
	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/reports"
)

// newCompareCmd is `kpbench compare OLD NEW`: CI's yes/no between two runs.
func newCompareCmd() *cobra.Command {
	var threshold string
	var alpha float64
	var allowMissing bool
	cmd := &cobra.Command{
		Use:   "compare OLD NEW [--threshold 10%] [--allow-missing]",
		Short: "Compare two runs metric by metric and fail on significant regressions",
		Long: `compare matches every metric (measurement, backend and parameters) of OLD with NEW
(results files or run directories) and prints old and new medians, the change, the
Mann-Whitney U p-value on the raw samples and a verdict. With fewer than 4 samples on a
side no difference can be significant ("~").

A metric regresses when it changes in the worse direction (time: larger; throughput:
smaller) beyond --threshold AND significantly (p < --alpha). Rule counts and sizes are
reported, never failed. A metric of OLD missing from NEW fails the comparison unless
--allow-missing: a benchmark that silently stopped running must not pass.

Exit status: 0 no regression, 1 a regression (or a missing metric), 2 bad input.`,
		Example: `  kpbench compare runs/main runs/my-branch
  kpbench compare old/results.json new/results.json --threshold 5%`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := reports.ParseThreshold(threshold)
			if err != nil {
				return badInput("--threshold: %w", err)
			}
			if alpha <= 0 || alpha >= 1 {
				return badInput("--alpha %g: want a level between 0 and 1, such as 0.05", alpha)
			}
			oldRun, err := reports.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			newRun, err := reports.Load(args[1])
			if err != nil {
				return usageError{err}
			}
			c := reports.Compare(oldRun, newRun, reports.CompareOptions{Threshold: t, Alpha: alpha, AllowMissing: allowMissing})
			if err := c.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			if err := c.Err(); err != nil {
				return failedError{err.Error()}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&threshold, "threshold", "10%", "relative change in the worse direction that fails, e.g. 10% or 2.5%")
	cmd.Flags().Float64Var(&alpha, "alpha", 0.05, "significance level of the Mann-Whitney U test")
	cmd.Flags().BoolVar(&allowMissing, "allow-missing", false, "let metrics of OLD that NEW lacks pass")
	return cmd
}
