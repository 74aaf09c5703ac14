package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/reports"
)

// newGateCmd is `kpbench gate RUN --a X --b Y`: the A/B gate within one run.
func newGateCmd() *cobra.Command {
	var a, b, threshold string
	var confidence float64
	var allowUnjudged bool
	cmd := &cobra.Command{
		Use:   "gate RUN --a BACKEND --b BACKEND [--threshold 10%] [--allow-unjudged]",
		Short: "Judge backend B against backend A measured side by side in one run",
		Long: `gate judges B against A on every gated metric of one run (a results file or run
directory of 'kpbench run S --backend A,B'; two variants of one proxy mode run in 3
interleaved rounds, A B / B A / A B, so that drift of the machine hits both). For each
metric it prints the ratio of B's median to A's, its bootstrap confidence interval
(moving blocks of sqrt(n) neighbouring samples, resampled within each round), B/A at p99,
and the Mann-Whitney U p-value. Lookups and syncs carry a control taken interleaved with
them: the gate shows B/A of each side's per-sample ratio to its control beside the
verdict, which judges the figures as measured (docs/ci.md: judging the ratio made the
gate worse here).

A metric regresses when B is worse than A beyond --threshold, the rank test is significant
at (1 - confidence) divided by the number of metrics judged (Bonferroni: A = B must not
fail one metric in twenty by chance), and the interval excludes 1. A distribution that fits
on A and not on B regresses; a rule count (exact) regresses when worse beyond the
threshold. A metric with too few samples for its test, or measured on one side only,
"cannot judge" and fails unless --allow-unjudged.

Exit status: 0 no regression, 1 a regression or an unjudged metric, 2 bad input.`,
		Example: `  kpbench run scenarios/pr.yaml --backend kube-proxy-nftables@/tmp/kp-main,kube-proxy-nftables@/tmp/kp-pr --out out/ab
  kpbench gate out/ab --a kube-proxy-nftables@/tmp/kp-main --b kube-proxy-nftables@/tmp/kp-pr --threshold 10%`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := reports.ParseThreshold(threshold)
			if err != nil {
				return badInput("--threshold: %w", err)
			}
			if confidence <= 0 || confidence >= 1 {
				return badInput("--confidence %g: want a level between 0 and 1, such as 0.95", confidence)
			}
			res, err := reports.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			rep, err := reports.Gate(res, reports.GateOptions{A: a, B: b, Threshold: t, Confidence: confidence})
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", args[0], err)}
			}
			if err := rep.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			if failed := rep.Failed(allowUnjudged); len(failed) > 0 {
				return failedError{fmt.Sprintf("gate: %d of %d metrics fail (regression, or cannot judge without --allow-unjudged)", len(failed), len(rep.Cells))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&a, "a", "", "the baseline backend of the run (as given to run --backend)")
	cmd.Flags().StringVar(&b, "b", "", "the backend judged against A")
	cmd.Flags().StringVar(&threshold, "threshold", "10%", "relative change in the worse direction that fails, e.g. 10%")
	cmd.Flags().Float64Var(&confidence, "confidence", 0.95, "confidence of the interval; the rank test's level is 1-confidence over the number of metrics")
	cmd.Flags().BoolVar(&allowUnjudged, "allow-unjudged", false, "let metrics that cannot be judged (too few samples, one side only) pass")
	_ = cmd.MarkFlagRequired("a")
	_ = cmd.MarkFlagRequired("b")
	return cmd
}
