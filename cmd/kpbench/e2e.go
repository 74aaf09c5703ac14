package main

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/e2e"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/kubestack"
	"kpbench.dev/kpbench/lab"
)

func newE2ECmd() *cobra.Command {
	var o e2e.Options
	var proxy string
	var quiet, requireAll bool
	cmd := &cobra.Command{
		Use:   "e2e --proxy iptables|nftables|ipvs [--kube-proxy PATH] [--nodes N] [--focus RE] [--skip RE] [--background-services N] --out DIR",
		Short: "Run the upstream Kubernetes e2e tests ([sig-network] Services) against a kpbench cluster",
		Long: `kpbench e2e brings up a 'kpbench cluster up' cluster for each kube-proxy mode in turn and runs
upstream's e2e.test (k8s.io/kubernetes/test/e2e ` + upstream.KubernetesVersion + `, built by 'make e2e-build', or here
when missing) against it from the lab's client host, with --provider=local and the built kubectl,
skipping ` + e2e.AlwaysSkip + `. It writes into --out: e2e.md (each test's outcome and duration on
each mode, and why it failed or skipped), e2e.json, and per mode junit_01.xml, e2e.log and
cluster.log. Exit 1 when a test failed or a run did not complete; 2 on bad input, before anything
is built. Ctrl-C stops e2e.test and tears the cluster down. See docs/e2e.md.`,
		Example: `  kpbench e2e --proxy nftables --out out/e2e-nft
  kpbench e2e --proxy iptables,nftables --focus '\[sig-network\] Services.*\[Conformance\]' --out out/e2e
  kpbench e2e --proxy nftables --kube-proxy ~/k8s/_output/bin/kube-proxy --background-services 1000 --out out/pr
  kpbench e2e --dry-run --out out/e2e-list          # the specs --focus and --skip select; no cluster
  kpbench vm run -- e2e --proxy ipvs --out out/e2e-ipvs   # IPVS: in the microVM`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Nodes < 1 { // 0 would mean "the default" to e2e.Options
				return badInput("--nodes %d: allowed values are 1-%d", o.Nodes, kubestack.MaxNodes)
			}
			if o.Parallel < 1 {
				return badInput("--parallel %d: allowed values are 1-%d", o.Parallel, e2e.MaxParallel)
			}
			if o.Timeout <= 0 {
				return badInput("--timeout %s: must be positive", o.Timeout)
			}
			for _, m := range strings.Split(proxy, ",") {
				if m = strings.TrimSpace(m); m != "" {
					o.Modes = append(o.Modes, kubeproxy.Mode(m))
				}
			}
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if !quiet {
				o.Progress = cmd.OutOrStdout()
			}
			o.Default()
			if err := o.Validate(); err != nil {
				return usageError{err}
			}
			if !o.DryRun {
				if err := requireRoot(cmd, nil); err != nil {
					return err
				}
			}
			start := time.Now()
			r, err := e2e.Run(cmd.Context(), o)
			if err != nil {
				if errors.Is(err, e2e.ErrBadInput) {
					return usageError{err}
				}
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "\nkpbench e2e: %s in %.0fs\n", summary(r), time.Since(start).Seconds())
			fmt.Fprintf(out, "report: %s (table), %s\n", filepath.Join(o.Out, e2e.ReportMarkdown), filepath.Join(o.Out, e2e.ReportJSON))
			if cmd.Context().Err() != nil {
				return failedError{"kpbench e2e: interrupted"}
			}
			if r.Failed() {
				return failedError{"kpbench e2e: " + summary(r)}
			}
			if unseen := r.Unseen(); requireAll && len(unseen) > 0 {
				return failedError{"kpbench e2e: --require-all: " + strings.Join(unseen, "; ")}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&proxy, "proxy", "", "kube-proxy mode: iptables, nftables or ipvs (ipvs only where the kernel has IPVS); several separated by commas run one after the other (required unless --dry-run)")
	fl.StringVar(&o.KubeProxy, "kube-proxy", "", "a kube-proxy binary of your own (e.g. a pull request's build) instead of the one 'make upstream' built")
	fl.IntVar(&o.Nodes, "nodes", e2e.DefaultNodes, fmt.Sprintf("nodes of each cluster (1-%d; some tests skip with fewer than 2 or 3)", kubestack.MaxNodes))
	fl.StringVar(&o.Focus, "focus", e2e.DefaultFocus, "the specs to run: a regular expression over their full names (ginkgo's --focus)")
	fl.StringVar(&o.Skip, "skip", "", "specs to leave out besides "+e2e.AlwaysSkip+" (ginkgo's --skip)")
	fl.IntVar(&o.BackgroundServices, "background-services", 0, fmt.Sprintf("make this many extra Services with EndpointSlices (namespace %s) before the run (0-%d)", e2e.BackgroundNamespace, e2e.MaxBackgroundServices))
	fl.StringVar(&o.Out, "out", "", "output directory (required)")
	fl.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound of the suite on each mode (ginkgo's --timeout)")
	fl.IntVar(&o.Parallel, "parallel", e2e.DefaultParallel, fmt.Sprintf("e2e.test processes running specs at once, under the ginkgo CLI (1-%d; 1: e2e.test alone)", e2e.MaxParallel))
	fl.BoolVar(&o.DryRun, "dry-run", false, "only list the specs --focus and --skip select (ginkgo's --dry-run): no cluster, no root")
	fl.StringVar(&o.Name, "name", "", "name of the clusters (1-10 of a-z, 0-9; default e2e and the process id)")
	fl.StringVar(&o.E2ETest, "e2e-test", "", "an e2e.test binary of your own instead of the one 'make e2e-build' built")
	fl.BoolVar(&requireAll, "require-all", false, "fail unless every selected test ran and passed on every mode (a skip fails too): for CI gates")
	fl.BoolVar(&quiet, "quiet", false, "do not echo e2e.test's output (it is in <out>/<mode>/e2e.log)")
	fl.StringVar(&o.ClusterDir, "dir", kubestack.DefaultDir, "directory of cluster records")
	fl.StringVar(&o.LabRegistryDir, "registry", lab.DefaultRegistryDir, "directory of lab records")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// summary counts the report's outcomes, per mode.
func summary(r *e2e.Report) string {
	var parts []string
	for _, run := range r.Runs {
		switch {
		case run.Suite == nil:
			parts = append(parts, fmt.Sprintf("%s: %s", run.Mode, run.Error))
		case r.DryRun:
			parts = append(parts, fmt.Sprintf("%d specs selected", len(run.Suite.Tests)))
		default:
			p, f, s := run.Suite.Counts()
			part := fmt.Sprintf("%s: %d passed, %d failed, %d skipped", run.Mode, p, f, s)
			if run.Error != "" {
				part += " (" + run.Error + ")"
			}
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "; ")
}
