package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/cluster/testbed"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/scenarios"
)

// normalizer returns how backend's rules are normalised for the diff (its facts in
// backends/all), or a bad-input error naming the backends that have one.
func normalizer(backend string) (*all.Normalizer, error) {
	if f, ok := all.Lookup(backend); ok && f.Normalizer != nil {
		return f.Normalizer, nil
	}
	return nil, badInput("diff-rules: backend %q: allowed values are %s", backend, strings.Join(all.Normalizable(), ", "))
}

func newDiffRulesCmd() *cobra.Command {
	var backend, against, node, keep string
	var dropComments, allApplies bool
	cmd := &cobra.Command{
		Use:   "diff-rules SCENARIO --backend B --against B2",
		Short: "Apply the same objects on two backends and diff their normalised rule sets",
		Long: `diff-rules builds the scenario's lab twice, once per backend, applies the same objects
(the scenario's manifests and its apply steps up to the first expect; with --all-applies
every apply step), waits until the node has programmed them, and dumps the node's rules:
iptables-save for the iptables modes, 'nft list table ip kube-proxy' for nftables. Both
dumps are normalised (counters and handles dropped, kube-proxy's hashed chain names mapped
to readable ones from the rule comments and DNAT targets, comments quoted, sets and the
rules of unordered chains sorted) and compared as a unified diff. When one side is
upstream kube-proxy it runs first, and the objects its API server makes by itself (the
default/kubernetes Service and its EndpointSlice) are applied to the other side too.

Exit status: 0 no difference, 1 the rule sets differ, 2 bad input, 3 the bench failed.`,
		Example: `  kpbench diff-rules scenarios/examples/nginx-nodeport.scenario.yaml --backend iptables --against kube-proxy-iptables
  kpbench diff-rules scenarios/conformance/hairpin.yaml --backend nftables --against kube-proxy-nftables --keep /tmp/d`,
		Args:    exactArgs(1),
		PreRunE: requireRoot,
		RunE: func(cmd *cobra.Command, args []string) error {
			na, err := normalizer(backend)
			if err != nil {
				return err
			}
			nb, err := normalizer(against)
			if err != nil {
				return err
			}
			if na.Kind != nb.Kind {
				return badInput("diff-rules: %s (%s) and %s (%s) write different rule families", backend, na.Kind, against, nb.Kind)
			}
			sc, err := scenarios.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			objs, skipped := sc.AppliedObjects(allApplies)
			for _, s := range skipped {
				fmt.Fprintf(cmd.ErrOrStderr(), "diff-rules: step %s is not applied (only manifests and apply steps are)\n", s)
			}
			opts := diffRulesOptions{node: node, normalize: kubeproxy.NormalizeOptions{DropComments: dropComments}, progress: cmd.ErrOrStderr()}
			a, b, err := dumpBoth(cmd.Context(), sc, backend, against, objs, opts)
			if err != nil {
				return err
			}
			if keep != "" {
				if err := os.MkdirAll(keep, 0o755); err != nil {
					return err
				}
				for name, d := range map[string]ruleDump{backend: a, against: b} {
					if err := os.WriteFile(filepath.Join(keep, name+".raw"), []byte(d.raw), 0o644); err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(keep, name+".norm"), []byte(d.norm), 0o644); err != nil {
						return err
					}
				}
			}
			diff, err := unifiedDiff(cmd.Context(), backend, a.norm, against, b.norm)
			if err != nil {
				return err
			}
			if diff == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "no difference between %s and %s on %s (%d lines)\n", backend, against, node, strings.Count(a.norm, "\n"))
				return nil
			}
			fmt.Fprint(cmd.OutOrStdout(), diff)
			return failedError{fmt.Sprintf("the rules of %s and %s differ on %s", backend, against, node)}
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "iptables", "the backend under test")
	cmd.Flags().StringVar(&against, "against", "kube-proxy-iptables", "the reference backend")
	cmd.Flags().StringVar(&node, "node", lab.NodeName(0), "the node whose rules are compared")
	cmd.Flags().BoolVar(&dropComments, "drop-comments", false, "compare without rule comments")
	cmd.Flags().BoolVar(&allApplies, "all-applies", false, "apply every apply step, not only those before the first expect")
	cmd.Flags().StringVar(&keep, "keep", "", "write the raw and normalised dumps into this directory")
	return cmd
}

type diffRulesOptions struct {
	node      string
	normalize kubeproxy.NormalizeOptions
	progress  io.Writer
	// synced, when set, runs once the node has programmed the objects.
	synced func(ctx context.Context, tb *testbed.Testbed) error
}

// dumpBoth dumps the rules of backend and of against. When one of them is upstream
// kube-proxy and the other is not, upstream runs first, and the objects its API server
// made by itself (the default/kubernetes Service and its EndpointSlice, which kube-proxy
// programs and the lab's store does not hold) are applied to the other's store too, so
// that both proxy the same Services.
func dumpBoth(ctx context.Context, sc *scenarios.Scenario, backend, against string, objs []runtime.Object, o diffRulesOptions) (a, b ruleDump, err error) {
	up, ours := against, backend
	switch {
	case all.NeedsAPIServer(against) && !all.NeedsAPIServer(backend):
	case all.NeedsAPIServer(backend) && !all.NeedsAPIServer(against):
		up, ours = backend, against
	default:
		if a, err = dumpRules(ctx, sc, backend, objs, o); err != nil {
			return a, b, err
		}
		b, err = dumpRules(ctx, sc, against, objs, o)
		return a, b, err
	}
	var own []runtime.Object
	uo := o
	uo.synced = func(ctx context.Context, tb *testbed.Testbed) error {
		var err error
		if own, err = tb.ControlPlane().OwnServices(ctx); err != nil {
			return err
		}
		fmt.Fprintf(o.progress, "diff-rules: the API server's own default/kubernetes Service (%d objects) is applied to %s too\n", len(own), ours)
		return nil
	}
	upDump, err := dumpRules(ctx, sc, up, objs, uo)
	if err != nil {
		return a, b, err
	}
	oursDump, err := dumpRules(ctx, sc, ours, append(slices.Clip(objs), own...), o)
	if err != nil {
		return a, b, err
	}
	if up == backend {
		return upDump, oursDump, nil
	}
	return oursDump, upDump, nil
}

type ruleDump struct{ raw, norm string }

// dumpRules runs the scenario's lab with backend, applies objs, waits for the sync and
// returns the node's rules.
func dumpRules(ctx context.Context, sc *scenarios.Scenario, backend string, objs []runtime.Object, o diffRulesOptions) (_ ruleDump, err error) {
	if err := all.Validate(backend); err != nil {
		return ruleDump{}, badInput("--backend: %v", err)
	}
	opts, err := diffTestbedOptions(sc, backend)
	if err != nil {
		return ruleDump{}, usageError{err}
	}
	t0 := time.Now()
	tb, err := testbed.Start(ctx, opts)
	if err != nil {
		return ruleDump{}, fmt.Errorf("%s: %w", backend, err)
	}
	defer func() { err = errors.Join(err, tb.Stop(context.WithoutCancel(ctx))) }()
	if len(objs) > 0 {
		if err := tb.Apply(ctx, objs...); err != nil {
			return ruleDump{}, fmt.Errorf("%s: apply: %w", backend, err)
		}
	}
	if err := tb.WaitSynced(ctx); err != nil {
		return ruleDump{}, fmt.Errorf("%s: %w", backend, err)
	}
	if o.synced != nil {
		if err := o.synced(ctx, tb); err != nil {
			return ruleDump{}, fmt.Errorf("%s: %w", backend, err)
		}
	}
	h, ok := tb.Host(o.node)
	if !ok || h.Kind != lab.KindNode {
		return ruleDump{}, badInput("--node %q: not a node of the scenario's lab", o.node)
	}
	f, _ := all.Lookup(backend) // valid: checked above
	raw, err := f.DumpRules(ctx, h.NetNSPath, tb.Settings())
	if err != nil {
		return ruleDump{}, fmt.Errorf("%s: dump %s: %w", backend, o.node, err)
	}
	d := ruleDump{raw: string(raw)}
	d.norm = f.Normalizer.Normalize(d.raw, o.normalize)
	fmt.Fprintf(o.progress, "diff-rules: %s: %d objects applied, %d lines dumped from %s in %.1fs\n", backend, len(objs), strings.Count(d.raw, "\n"), o.node, time.Since(t0).Seconds())
	return d, nil
}

// diffTestbedOptions builds the testbed of a scenario as `kpbench run` does, except that
// our backends sync as soon as changes arrive; kube-proxy keeps the scenario's periods.
func diffTestbedOptions(sc *scenarios.Scenario, backend string) (testbed.Options, error) {
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	o, err := sc.TestbedOptions(backend, "diff"+hex.EncodeToString(rnd[:]))
	if err != nil {
		return o, err
	}
	if !all.NeedsAPIServer(backend) {
		o.MinSyncPeriod, o.SyncPeriod = 0, 0
	}
	return o, nil
}

// unifiedDiff runs `diff -u` on the two texts; "" means equal.
func unifiedDiff(ctx context.Context, nameA, a, nameB, b string) (string, error) {
	dir, err := os.MkdirTemp("", "kpbench-diff-rules-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	pa, pb := filepath.Join(dir, nameA), filepath.Join(dir, nameB)
	if nameA == nameB {
		pb += ".against"
	}
	if err := os.WriteFile(pa, []byte(a), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(pb, []byte(b), 0o644); err != nil {
		return "", err
	}
	c := exec.CommandContext(ctx, "diff", "-u", "--label", nameA, "--label", nameB, pa, pb)
	out, err := c.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return string(out), nil
	}
	return "", fmt.Errorf("diff -u: %w", err)
}
