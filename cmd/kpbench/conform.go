package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/conformance"
)

func newConformCmd() *cobra.Command {
	var backend, out, dir, cases string
	var waitTimeout time.Duration
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "conform [--backend B[,B...]|all|ours] [--out DIR] [--cases GLOB[,GLOB...]] [--dir SUITE]",
		Short: "Run the conformance suite (kube-proxy's e2e behaviours) on each backend",
		Long: `conform runs every scenario of the conformance suite (one per kube-proxy e2e behaviour:
basic and multiport endpoints, NodePort, session affinity, no endpoints, the headless and
service-proxy-name labels, hairpin, source IP, traffic policies, terminating endpoints, UDP
conntrack, load-balancer source ranges, externalIPs) on each backend, each on a fresh lab,
prints a case × backend matrix and writes DIR/junit.xml and DIR/results.json; for every
failed step, the nodes' state right after it (rule dumps, IPVS's connection table,
conntrack's flows) goes to DIR/state/<case>-<backend>-step<N>.txt.

A backend that cannot run on this machine (no IPVS, a restore binary missing or failing)
has its cases skipped with the reason, and a skip is not a pass: conform exits 1 unless
--allow-skip. A step's knownFailure turns its failure on the backends it names into xfail
(and its pass into xpass, shown in the matrix and in junit.xml's system-out).

Exit status: 0 every case × backend passed, xfailed or xpassed (or skipped, with
--allow-skip), 1 a case failed or was skipped, 2 bad input, 3 the bench failed.`,
		Example: `  kpbench conform
  kpbench conform --backend iptables,nftables --cases 'session-affinity-*' --out out/conform`,
		Args:    cobra.NoArgs,
		PreRunE: requireRoot,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opener, backends, err := bf.kf.openerAndBackends(cmd, backend, "")
			if err != nil {
				return err
			}
			if err := bf.tools.check(backends); err != nil {
				return err
			}
			if err := conformance.Exists(dir); err != nil {
				return usageError{fmt.Errorf("%w (run from the repository root or set --dir)", err)}
			}
			suite, err := conformance.Load(dir, cases)
			if err != nil {
				return usageError{err}
			}
			if out == "" {
				out = defaultOut("conformance")
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("conform: %w", err)
			}
			rep, runErr := conformance.Run(cmd.Context(), suite, conformance.Options{Backends: backends, Progress: cmd.ErrOrStderr(), StateDir: filepath.Join(out, "state"), WaitTimeout: waitTimeout, Tools: bf.tools.Root(), Opener: opener})
			if rep == nil {
				return runErr
			}
			if err := rep.WriteMatrix(cmd.OutOrStdout()); err != nil {
				return errors.Join(runErr, err)
			}
			if err := writeConformReports(out, rep.ReportResults(cmd.Context())); err != nil {
				return errors.Join(runErr, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s\n", filepath.Join(out, "junit.xml"), filepath.Join(out, reports.ResultsFile))
			if runErr != nil {
				return runErr
			}
			if v := rep.Verdict(bf.allowSkip); v != "" {
				return failedError{"conform: " + v + " (see junit.xml)"}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "all", "backends to run, comma-separated, all (every backend that runs on this machine) or ours (all but upstream kube-proxy)")
	cmd.Flags().StringVar(&out, "out", "", "results directory (default out/<time>-conformance)")
	cmd.Flags().StringVar(&cases, "cases", "*", "run only the cases whose name matches one of these comma-separated globs")
	addWaitTimeoutFlag(cmd, &waitTimeout, os.Getenv)
	bf.add(cmd, "exit 0 when a backend cannot run here and its cases are skipped (still printed)")
	cmd.Flags().StringVar(&dir, "dir", conformance.DefaultDir, "the suite's directory (relative to the working directory)")
	return cmd
}

// writeConformReports writes results.json, junit.xml and the other report files.
func writeConformReports(out string, res *reports.Results) error {
	if _, err := reports.WriteAll(out, res); err != nil {
		return fmt.Errorf("conform: write reports: %w", err)
	}
	return nil
}
