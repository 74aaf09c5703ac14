package main

import (
	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/reports"
)

// newCompareCmd is `kpbench compare OLD NEW`: CI's yes/no between two runs.
func newCompareCmd() *cobra.Command {
	var threshold, minEffect string
	var alpha float64
	var allowMissing, allowUnjudged, strict bool
	cmd := &cobra.Command{
		Use:   "compare OLD NEW [--threshold 10%] [--min-effect 20%] [--strict] [--allow-missing] [--allow-unjudged]",
		Short: "Compare two runs metric by metric and fail on significant regressions",
		Long: `compare matches every metric (measurement, backend and parameters) of OLD with NEW
(results files or run directories) and prints old and new medians ± CI with their p99
and max, the change, the p-value of the rule that judged it, the machine drift and a
verdict. It judges every gated figure as the run declared it (older results files:
as kpbench declared them then):

  times, rates   the worse direction beyond --threshold AND significant (p < --alpha):
                 Mann-Whitney U with 4+ samples a side (and the declared minimum);
                 fewer: a t-test on log samples with the noise pooled over the sizes
                 of the same figure and backend; else every NEW sample worse than
                 every OLD one by the threshold. Lookups also gate their p99.
  rule counts    any change fails (exact).
  distributions  a fit in OLD that is a misfit in NEW (chi-square, Holm-corrected
                 over the distributions judged, family-wise 0.001).

Machine drift: lookups and syncs carry a control taken interleaved with them (the
established-connection request in every lookup round; a fixed CPU work timed around
every sync). When no control moved beyond --threshold, there is no drift to explain and
figures are judged as measured. When the machine changed, a regression of a figure with
a control is judged again on its per-sample ratio to the control: within --min-effect
(default 20%, and at least --threshold) it is "drift" and passes; beyond, "DRIFT?" (the
control explains drift to first order only). A gated figure without a control that
changed within the square of the worst control's drift is "DRIFT?" too; more stays a
REGRESSION. DRIFT? is shown and passes unless --strict. Results written before controls
were interleaved are normalised by the control's median. Figures compare cannot judge
(too few samples, no figure; under --strict also DRIFT?) fail unless --allow-unjudged;
metrics of OLD missing from NEW fail unless --allow-missing.
Figures that are not gated are shown, never failed.

Exit status: 0 pass, 1 a regression, a missing or an unjudged metric, 2 bad input.`,
		Example: `  kpbench compare runs/main runs/my-branch
  kpbench compare old/results.json new/results.json --threshold 5%`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := reports.ParseThreshold(threshold)
			if err != nil {
				return badInput("--threshold: %w", err)
			}
			me, err := reports.ParseThreshold(minEffect)
			if err != nil {
				return badInput("--min-effect: %w", err)
			}
			if me == 0 {
				me = -1 // none: --threshold alone
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
			c := reports.Compare(oldRun, newRun, reports.CompareOptions{Threshold: t, Alpha: alpha, MinEffect: me, Strict: strict, AllowMissing: allowMissing, AllowUnjudged: allowUnjudged})
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
	cmd.Flags().StringVar(&minEffect, "min-effect", reports.FormatThreshold(reports.DefaultMinEffect), "least change a figure must still show against its interleaved control to regress (0% for none: --threshold alone)")
	cmd.Flags().BoolVar(&strict, "strict", false, `let "DRIFT?" (a change the machine's drift could explain, of a figure without a control) fail like an unjudged figure`)
	cmd.Flags().Float64Var(&alpha, "alpha", 0.05, "significance level of the Mann-Whitney U test")
	cmd.Flags().BoolVar(&allowMissing, "allow-missing", false, "let metrics of OLD that NEW lacks pass")
	cmd.Flags().BoolVar(&allowUnjudged, "allow-unjudged", false, "let gated metrics that cannot be judged (too few samples, no figure, drift it cannot explain) pass")
	return cmd
}
