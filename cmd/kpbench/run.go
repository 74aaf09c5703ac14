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
	var backend, out string
	var waitTimeout time.Duration
	var kube *kubeTarget
	cmd := &cobra.Command{
		Use:   "run SCENARIO [--backend B[,B...]|all|ours] [--out DIR]",
		Short: "Run a scenario on one or more backends and write its results and report",
		Long: `run builds the scenario's lab for each backend in turn, applies its manifests, runs its steps
(changes, waits, expectations, measurements) and writes DIR/results.json with the environment,
raw samples and summaries, plus bench.txt, CSV files, junit.xml, plots and report.html,
and each node agent's metrics under kube-proxy's names (metrics-<backend>-<node>.prom).
After a failed step, the nodes' state (rule dumps, IPVS's connection table, conntrack's
flows) goes to DIR/state/<scenario>-<backend>-step<N>.txt.

Exit status: 0 every expectation held, 1 an expectation failed, 2 bad input, 3 the bench failed.`,
		Example: `  kpbench run scenarios/scale.yaml --backend iptables,iptables-legacy,nftables --out out/scale
  kpbench run scenarios/examples/nginx-nodeport.scenario.yaml --backend all`,
		Args:    exactArgs(1),
		PreRunE: requireRoot,
		RunE: func(cmd *cobra.Command, args []string) error {
			var target scenarios.ClusterTarget
			if kube.enabled() {
				t, err := kube.scenarioTarget(cmd)
				if err != nil {
					return err
				}
				target = t
				backend = ""
			}
			backends, err := parseBackends(backend)
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
			if target == nil {
				if err := sc.ValidateFor(scenarios.ValidationOptions{Backends: backends, Facts: scenarios.RegistryFacts{}}); err != nil {
					return usageError{err}
				}
			}
			for _, w := range sc.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if out == "" {
				out = defaultOut(sc.Name)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			res, runErr := scenarios.Run(cmd.Context(), sc, scenarios.RunOptions{Backends: backends, Facts: scenarios.RegistryFacts{}, Progress: scenarios.LineProgress{W: cmd.ErrOrStderr()}, MetricsDir: out, StateDir: filepath.Join(out, "state"), WaitTimeout: waitTimeout, Target: target})
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
			if scenarios.Failed(res) {
				return failedError{"some expectations failed (see junit.xml)"}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "", "backends to run, comma-separated, all (every backend that runs here) or ours (all but upstream kube-proxy) (default: the scenario's proxy mode)")
	cmd.Flags().StringVar(&out, "out", "", "results directory (default out/<time>-<scenario>)")
	addWaitTimeoutFlag(cmd, &waitTimeout, os.Getenv)
	kube = addKubeconfigFlags(cmd)
	return cmd
}
