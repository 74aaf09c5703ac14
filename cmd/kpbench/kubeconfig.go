package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/cluster/kube"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/manifest"
	"kpbench.dev/kpbench/scenarios"
	"kpbench.dev/kpbench/scenarios/check"
)

// kubeFlags hold the flags that point a command at a cluster that kpbench did not build
// (--kubeconfig and its companions).
type kubeFlags struct {
	kubeconfig, context, image string
	keepImages, dryRun         bool
	allowNotChecked            bool
	maxObjects                 int
	deleteTimeout              time.Duration
}

// addKubeconfigFlags registers the real-cluster flags on cmd. With --kubeconfig, root is
// not needed (nothing is built on this machine): the command's PreRunE is skipped.
func addKubeconfigFlags(cmd *cobra.Command) *kubeFlags {
	k := &kubeFlags{}
	f := cmd.Flags()
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "run against the cluster of this kubeconfig (only this file is read: never KUBECONFIG, ~/.kube/config or in-cluster credentials)")
	f.StringVar(&k.context, "context", "", "the kubeconfig's context to use (default its current context)")
	f.StringVar(&k.image, "image", upstream.AgnhostImage, "with --kubeconfig: the image that replaces the pods' containers (agnhost netexec's API)")
	f.BoolVar(&k.keepImages, "keep-images", false, "with --kubeconfig: keep the manifests' images (only reachability is checked: the answers do not name their pod)")
	f.BoolVar(&k.dryRun, "dry-run", false, "with --kubeconfig: list what would be created in the cluster and exit")
	f.IntVar(&k.maxObjects, "max-objects", kube.DefaultMaxObjects, "with --kubeconfig: refuse a run that would create more objects and pods than this")
	f.BoolVar(&k.allowNotChecked, "allow-not-checked", false, "with --kubeconfig: paths that cannot be checked on the cluster do not fail the run (--allow-skip implies it)")
	f.DurationVar(&k.deleteTimeout, "delete-timeout", 2*time.Minute, "with --kubeconfig: how long to wait for the run's namespace to be gone at the end")
	pre := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if k.enabled() {
			return k.validate()
		}
		for _, name := range []string{"context", "image", "keep-images", "dry-run", "max-objects", "allow-not-checked", "delete-timeout"} {
			if c.Flags().Changed(name) {
				return badInput("--%s needs --kubeconfig", name)
			}
		}
		if pre != nil {
			return pre(c, args)
		}
		return nil
	}
	return k
}

// enabled reports whether the command targets a real cluster.
func (k *kubeFlags) enabled() bool { return k.kubeconfig != "" }

func (k *kubeFlags) validate() error {
	switch {
	case k.maxObjects < 1:
		return badInput("--max-objects %d: must be at least 1", k.maxObjects)
	case k.image == "":
		return badInput("--image: must not be empty")
	case k.deleteTimeout <= 0:
		return badInput("--delete-timeout %s: must be positive", k.deleteTimeout)
	}
	return nil
}

// benchFlags are the flags check, conform and run share: a real cluster instead of a lab
// (--kubeconfig and its kin), the tools the backends run (--tools), and --allow-skip.
type benchFlags struct {
	kf        *kubeFlags
	tools     *toolsFlag
	allowSkip bool
}

// add adds them to cmd (after its PreRunE is set: --tools wraps it); allowSkipDoc says what
// --allow-skip lets pass.
func (f *benchFlags) add(cmd *cobra.Command, allowSkipDoc string) {
	f.kf = addKubeconfigFlags(cmd)
	f.tools = addToolsFlag(cmd)
	cmd.Flags().BoolVar(&f.allowSkip, "allow-skip", false, allowSkipDoc)
}

// openerAndBackends returns the opener (nil: the lab) and the backends --backend names
// plus those of --backend-if-available that can run here (selectBackends, which says on
// stderr why any was left out); with --kubeconfig there are none: the cluster's own proxy
// runs the scenarios.
func (k *kubeFlags) openerAndBackends(cmd *cobra.Command, backend, ifAvailable string) (scenarios.Opener, []string, error) {
	opener, err := k.opener(cmd)
	if err != nil || opener != nil {
		return opener, nil, err
	}
	backends, err := selectBackends(cmd.ErrOrStderr(), cmd.CommandPath(), backend, ifAvailable, all.ThisMachine)
	return nil, backends, err
}

// opener returns what opens the cluster of --kubeconfig for each scenario that conform
// and run send there, or nil (and no error) without --kubeconfig: the lab. It refuses
// the flags that have no meaning there.
func (k *kubeFlags) opener(cmd *cobra.Command) (scenarios.Opener, error) {
	if !k.enabled() {
		return nil, nil
	}
	for _, name := range []string{"backend", ifAvailableFlag, "tools", "rounds"} {
		if cmd.Flags().Changed(name) {
			return nil, badInput("--%s is a lab flag: with --kubeconfig the cluster's own proxy runs the scenarios", name)
		}
	}
	for _, name := range []string{"dry-run", "allow-not-checked"} {
		if cmd.Flags().Changed(name) {
			return nil, badInput("--%s: only check --kubeconfig has it", name)
		}
	}
	client, _, err := kube.Client(k.kubeconfig, k.context)
	if err != nil {
		return nil, wrapKubeErr(err)
	}
	return &kubeOpener{
		client:        client,
		opts:          kube.Options{Image: k.image, KeepImages: k.keepImages, MaxObjects: k.maxObjects, Log: cmd.ErrOrStderr()},
		deleteTimeout: k.deleteTimeout,
	}, nil
}

// kubeOpener opens the cluster of --kubeconfig for each scenario: a namespace of the
// scenario's own with its probers, deleted when the scenario ends.
type kubeOpener struct {
	client        kubernetes.Interface
	opts          kube.Options
	deleteTimeout time.Duration
}

// Name is "cluster": the results name it in place of a backend.
func (o *kubeOpener) Name() string { return "cluster" }

// Open creates the scenario's namespace and probers; close deletes the namespace.
func (o *kubeOpener) Open(ctx context.Context, sc *scenarios.Scenario, _ string) (cluster.Cluster, func(context.Context) error, error) {
	opts := o.opts
	opts.RunID = randomID(6)
	c, err := kube.New(ctx, o.client, nil, opts)
	if err != nil {
		return nil, nil, err
	}
	if want, have := sc.Topology.Nodes, len(c.Nodes()); want > have {
		return nil, nil, fmt.Errorf("%w: scenario %s wants %d nodes, the cluster has %d Ready ones", kube.ErrBadConfig, sc.Name, want, have)
	}
	closer := func(ctx context.Context) error { return c.Close(ctx, o.deleteTimeout) }
	if err := c.Start(ctx); err != nil {
		return nil, nil, errors.Join(err, closer(context.WithoutCancel(ctx)))
	}
	return c, closer, nil
}

// wrapKubeErr marks the cluster's refusals of the user's input as bad input.
func wrapKubeErr(err error) error {
	if errors.Is(err, kube.ErrBadConfig) {
		return usageError{err}
	}
	return err
}

// check runs `kpbench check FILE... --kubeconfig P`: the manifests are applied in a
// namespace of the run's own on the cluster, checked from prober pods, and the namespace
// is deleted at the end (also on failure and Ctrl-C).
func (k *kubeFlags) check(cmd *cobra.Command, files []string, output string) (err error) {
	if output != "table" && output != "json" {
		return badInput("-o %q: allowed values are table, json", output)
	}
	for _, name := range []string{"backend", "nodes", "clients", "tools"} {
		if cmd.Flags().Changed(name) {
			return badInput("--%s is a lab flag: with --kubeconfig the cluster's own nodes and proxy are checked", name)
		}
	}
	objs, err := manifest.ReadFiles(files...)
	if err != nil {
		return usageError{err}
	}
	client, _, err := kube.Client(k.kubeconfig, k.context)
	if err != nil {
		return wrapKubeErr(err)
	}
	ctx := cmd.Context()
	start := time.Now()
	c, err := kube.New(ctx, client, manifest.RuntimeObjects(objs), kube.Options{
		RunID: randomID(6), Image: k.image, KeepImages: k.keepImages, MaxObjects: k.maxObjects, Log: cmd.ErrOrStderr(),
	})
	if err != nil {
		return wrapKubeErr(err)
	}
	if k.dryRun {
		return c.Plan(cmd.OutOrStdout())
	}
	defer func() {
		cerr := c.Close(context.WithoutCancel(ctx), k.deleteTimeout)
		if cerr != nil {
			cerr = fmt.Errorf("%w (remove it with: kpbench cluster cleanup --kubeconfig %s)", cerr, k.kubeconfig)
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "namespace %s deleted\n", c.Namespace())
		}
		err = errors.Join(err, cerr)
	}()
	for _, n := range c.Notes() {
		fmt.Fprintln(cmd.ErrOrStderr(), "change:", n)
	}
	if err := c.Start(ctx); err != nil {
		err = fmt.Errorf("apply %s: %w", strings.Join(files, ", "), err)
		if apierrors.IsInvalid(err) {
			return usageError{err} // the manifests do not fit this cluster (a taken nodePort, say)
		}
		return err
	}
	outs, err := check.Run(ctx, c, check.Options{ReachabilityOnly: k.keepImages})
	if err != nil {
		return err
	}
	info := c.Info(ctx)
	name := fmt.Sprintf("cluster %s (%d nodes, proxy %s)", info.ServerVersion, info.Nodes, info.ProxyMode)
	if info.ProxyMode == "" {
		name = fmt.Sprintf("cluster %s (%d nodes, proxy mode unknown)", info.ServerVersion, info.Nodes)
		fmt.Fprintln(cmd.ErrOrStderr(), "proxy mode:", info.ProxyModeNote)
	}
	if err := printAs(cmd.OutOrStdout(), output, struct {
		Backend    string          `json:"backend"`
		Server     string          `json:"serverVersion"`
		Nodes      int             `json:"nodes"`
		ProxyMode  string          `json:"proxyMode,omitempty"`
		Kubeconfig string          `json:"kubeconfig"`
		Namespace  string          `json:"namespace"`
		Passed     bool            `json:"passed"`
		Outcomes   []check.Outcome `json:"outcomes"`
	}{name, info.ServerVersion, info.Nodes, info.ProxyMode, k.kubeconfig, c.Namespace(), !check.Failed(outs) && (k.allowNotChecked || check.NotCheckedCount(outs) == 0), outs}, func() error {
		printOutcomes(cmd.OutOrStdout(), name, outs, time.Since(start))
		return nil
	}); err != nil {
		return err
	}
	if check.Failed(outs) {
		return failedError{"check failed: some paths do not work (see the table)"}
	}
	if n := check.NotCheckedCount(outs); n > 0 && !k.allowNotChecked {
		return failedError{fmt.Sprintf("check incomplete: %d paths could not be checked on this cluster (see the table; --allow-not-checked accepts that)", n)}
	}
	// The rest of the lab's rule: paths skipped for another reason (SCTP), or nothing
	// to check at all, are not a pass either.
	return checkVerdict(outs, k.allowNotChecked)
}

// newClusterCleanupCmd is `kpbench cluster cleanup --kubeconfig P`: it deletes the
// namespaces that killed runs left in a cluster.
func newClusterCleanupCmd() *cobra.Command {
	var kubeconfig, kctx string
	var force bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "cleanup --kubeconfig PATH [--context C] [--force]",
		Short: "Delete the namespaces kpbench runs left in a cluster (labelled kpbench.dev/run)",
		Long: `cleanup deletes every namespace labelled kpbench.dev/run in the cluster of the kubeconfig
(what a killed check left), except those whose owner is a kpbench process still running on
this machine (--force deletes them too), and waits until each is gone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return badInput("--kubeconfig is required")
			}
			client, _, err := kube.Client(kubeconfig, kctx)
			if err != nil {
				return wrapKubeErr(err)
			}
			res, err := kube.Cleanup(cmd.Context(), client, force, timeout)
			for _, k := range res.Kept {
				fmt.Fprintln(cmd.OutOrStdout(), "kept", k)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d namespaces %v\n", len(res.Removed), res.Removed)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (only this file is read)")
	cmd.Flags().StringVar(&kctx, "context", "", "the kubeconfig's context (default its current one)")
	cmd.Flags().BoolVar(&force, "force", false, "also delete the namespaces of runs still alive on this machine")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for each namespace to be gone")
	return cmd
}
