package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios"
)

// parseBackends reads --backend: a comma-separated list of names, "all" (every backend
// that runs on this kernel) or "ours" (all but upstream kube-proxy).
func parseBackends(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	switch s {
	case "all":
		return all.Available(), nil
	case "ours":
		return all.Ours(), nil
	}
	var out []string
	for _, b := range strings.Split(s, ",") {
		b = strings.TrimSpace(b)
		if err := all.Validate(b); err != nil {
			return nil, badInput("--backend %q: allowed values are all, ours, or a comma-separated list of backend references: %v", b, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func defaultOut(name string) string {
	return filepath.Join("out", time.Now().UTC().Format("20060102T150405Z")+"-"+name)
}

func newRunCmd() *cobra.Command {
	var backend, ifAvailable, out string
	var waitTimeout time.Duration
	var rounds int
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "run SCENARIO [--backend B[,B...]|all|ours] [--backend-if-available B[,B...]] [--out DIR]",
		Short: "Run a scenario on one or more backends and write its results and report",
		Long: `run builds the scenario's lab for each backend in turn, applies its manifests, runs its steps
(changes, waits, expectations, measurements) and writes DIR/results.json with the environment,
raw samples and summaries, plus bench.txt, CSV files, junit.xml, plots and report.html,
and each node agent's metrics under kube-proxy's names (metrics-<backend>-<node>.prom).
--backend-if-available adds backends where this machine can run them (ipvs where the
kernel has IPVS), and names each one it leaves out on stderr with the reason.
After a failed step, the nodes' state (rule dumps, IPVS's connection table, conntrack's
flows) goes to DIR/state/<scenario>-<backend>-step<N>.txt.

A case that was skipped (not checked on a backend) is not a pass: exit 1 unless
--allow-skip.

Exit status: 0 every expectation held, 1 an expectation failed or was skipped, 2 bad
input, 3 the bench failed.`,
		Example: `  kpbench run scenarios/scale.yaml --backend iptables,iptables-legacy,nftables --out out/scale
  kpbench run scenarios/examples/nginx-nodeport.scenario.yaml --backend all
  kpbench run scenarios/bench.yaml --backend iptables,nftables --backend-if-available ipvs`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opener, backends, err := bf.kf.openerAndBackends(cmd, backend, ifAvailable)
			if err != nil {
				return err
			}
			sc, err := scenarios.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			if len(backends) == 0 {
				backends = []string{scenarios.ModeBackend(sc.ProxyConfig.Mode)}
			}
			if opener == nil {
				if err := sc.ValidateFor(scenarios.ValidationOptions{Backends: backends, Facts: scenarios.RegistryFacts{}}); err != nil {
					return usageError{err}
				}
			}
			if err := bf.tools.check(backends); err != nil {
				return err
			}
			for _, w := range sc.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if rounds < 0 || rounds > 100 {
				return badInput("--rounds %d: want 0 (automatic) to 100", rounds)
			}
			if rounds == 0 {
				rounds = scenarios.DefaultRounds(backends)
			}
			if out == "" {
				out = defaultOut(sc.Name)
			}
			if err := requireRoot(cmd, nil); err != nil { // after the input's checks: bad input says so first
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			res, runErr := scenarios.Run(cmd.Context(), sc, scenarios.RunOptions{Backends: backends, Facts: scenarios.RegistryFacts{}, Progress: scenarios.NewProgress(cmd.ErrOrStderr()), MetricsDir: out, StateDir: filepath.Join(out, "state"), WaitTimeout: waitTimeout, Tools: bf.tools.Root(), Rounds: rounds, Opener: opener})
			if res != nil {
				files, err := reports.WriteAll(out, res)
				if err != nil {
					return errors.Join(runErr, err)
				}
				_ = reports.Summary(cmd.OutOrStdout(), res)
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %d files to %s; report: %s\n", len(files), out, filepath.Join(out, "report.html"))
			}
			if runErr != nil {
				return runErr
			}
			return runVerdict(res, bf.allowSkip)
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "", "backends to run, comma-separated, all (every backend that runs here) or ours (all but upstream kube-proxy) (default: the scenario's proxy mode)")
	addIfAvailableFlag(cmd, &ifAvailable)
	cmd.Flags().StringVar(&out, "out", "", "results directory (default out/<time>-<scenario>)")
	cmd.Flags().IntVar(&rounds, "rounds", 0, "run the backends this many times, interleaved (A B, B A, ...), each pass labelled round=N for kpbench gate (0: 3 for two variants of one proxy mode, else 1)")
	addWaitTimeoutFlag(cmd, &waitTimeout, os.Getenv)
	bf.add(cmd, "exit 0 when cases were skipped (still reported)")
	return cmd
}

// runVerdict is run's gate: a failed case fails it, and so does a skipped one unless
// allowSkip, naming each skipped case with its backend and reason.
func runVerdict(res *reports.Results, allowSkip bool) error {
	if scenarios.Failed(res) {
		return failedError{"some expectations failed (see junit.xml)"}
	}
	if allowSkip {
		return nil
	}
	var skipped []string
	for _, c := range res.Cases {
		if c.Result == reports.CaseSkip {
			skipped = append(skipped, fmt.Sprintf("%s on %s: %s", c.Name, c.Backend, c.Reason))
		}
	}
	if len(skipped) > 0 {
		return failedError{fmt.Sprintf("%d cases not checked (%s; --allow-skip accepts them)", len(skipped), strings.Join(skipped, "; "))}
	}
	return nil
}
