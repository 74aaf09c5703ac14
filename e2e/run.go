//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/kubestack"
	"kpbench.dev/kpbench/lab"
)

// interruptGrace is how long e2e.test gets after SIGINT (ginkgo then runs the specs'
// cleanup and writes its report) before it and its children are killed.
const interruptGrace = 30 * time.Second

// ClusterLog is the file of a mode's directory that receives the cluster's own log (the lab
// kubelets' messages).
const ClusterLog = "cluster.log"

// Run runs the suite on one cluster per mode, one after the other, each torn down before the
// next is built, and writes the report into o.Out after each mode (so that an interrupted
// run still leaves one). A mode whose cluster does not come up, or whose e2e.test does not
// finish, has its Run.Error set; the other modes still run unless ctx ends. It returns an
// error only when it could not report at all; Report.Failed says whether anything failed.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.Default()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	bins, err := binaries(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	r := &Report{
		Kubernetes: upstream.KubernetesVersion, Focus: o.Focus, Skip: o.skipPattern(), Nodes: o.Nodes,
		KubeProxy: bins.kubeProxy, BackgroundServices: o.BackgroundServices, DryRun: o.DryRun, Started: time.Now().UTC(),
	}
	if o.DryRun {
		run := dryRun(ctx, o, bins)
		r.Runs = append(r.Runs, run)
		return r, r.WriteFiles(o.Out)
	}
	for _, m := range o.Modes {
		var run ModeRun
		if err := ctx.Err(); err != nil {
			run = ModeRun{Mode: string(m), Error: "not run: interrupted"}
		} else {
			run = runMode(ctx, o, bins, m)
		}
		r.Runs = append(r.Runs, run)
		if err := r.WriteFiles(o.Out); err != nil {
			return r, err
		}
	}
	return r, nil
}

// binaryPaths are the programs a run uses.
type binaryPaths struct {
	e2eTest, ginkgo, kubectl, kubeProxy string
}

// binaries finds e2e.test and ginkgo (building them when missing and a kpbench checkout is
// at hand), kubectl and the kube-proxy the clusters run.
func binaries(ctx context.Context, o Options) (binaryPaths, error) {
	var b binaryPaths
	var err error
	if o.E2ETest != "" {
		b.e2eTest = o.E2ETest
		if o.Parallel > 1 {
			if b.ginkgo, err = upstream.Binary(upstream.Ginkgo); err != nil {
				return b, err
			}
		}
	} else if b.e2eTest, b.ginkgo, err = EnsureE2ETest(ctx, o.Progress); err != nil {
		return b, err
	}
	if o.DryRun {
		return b, nil
	}
	if b.kubectl, err = upstream.Binary(upstream.Kubectl); err != nil {
		return b, err
	}
	b.kubeProxy = o.KubeProxy
	if b.kubeProxy == "" {
		if b.kubeProxy, err = upstream.Binary(upstream.KubeProxy); err != nil {
			return b, err
		}
	}
	for _, n := range kubestack.Binaries() {
		if _, err := upstream.Binary(n); err != nil {
			return b, err
		}
	}
	return b, nil
}

// dryRun lists the selected specs: e2e.test with ginkgo's --dry-run, no cluster, in the
// calling namespace (it connects nowhere).
func dryRun(ctx context.Context, o Options, bins binaryPaths) ModeRun {
	run := ModeRun{Mode: "dry-run"}
	dir := filepath.Join(o.Out, run.Mode)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		run.Error = err.Error()
		return run
	}
	o.Parallel = 1 // a listing needs no processes of its own
	bin, args := command(o, bins, dir, nil, true)
	t0 := time.Now()
	err := runE2ETest(ctx, "", bin, args, dir, o.Progress)
	run.E2ESeconds = time.Since(t0).Seconds()
	readSuite(&run, o.Out, dir, err)
	if run.Suite != nil {
		for i := range run.Suite.Tests {
			if run.Suite.Tests[i].Outcome == Passed {
				run.Suite.Tests[i].Outcome, run.Suite.Tests[i].Seconds = Listed, 0
			}
		}
	}
	return run
}

// runMode brings a cluster up for mode m, runs the suite from its client host and tears the
// cluster down, whatever happened.
func runMode(ctx context.Context, o Options, bins binaryPaths, m kubeproxy.Mode) (run ModeRun) {
	run = ModeRun{Mode: string(m)}
	dir := filepath.Join(o.Out, string(m))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		run.Error = err.Error()
		return run
	}
	logf, err := os.Create(filepath.Join(dir, ClusterLog))
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer logf.Close()
	log := o.Logger.With("mode", m)

	log.Info("bringing the cluster up", "name", o.Name, "nodes", o.Nodes)
	t0 := time.Now()
	st, err := kubestack.Up(ctx, o.clusterConfig(m), kubestack.WithLogger(slog.New(slog.NewTextHandler(logf, nil))))
	if err != nil {
		run.Error = "cluster up: " + err.Error()
		return run
	}
	run.ClusterUpSeconds = time.Since(t0).Seconds()
	defer func() {
		log.Info("tearing the cluster down")
		if err := st.Down(context.WithoutCancel(ctx)); err != nil {
			run.Error = errors.Join(errorOf(run.Error), fmt.Errorf("cluster down: %w", err)).Error()
		}
	}()
	log.Info("cluster is up", "seconds", run.ClusterUpSeconds)

	if o.BackgroundServices > 0 {
		tb := time.Now()
		if err := createBackground(ctx, st, o.BackgroundServices); err != nil {
			run.Error = err.Error()
			return run
		}
		run.BackgroundSeconds = time.Since(tb).Seconds()
		log.Info("background Services made", "count", o.BackgroundServices, "seconds", run.BackgroundSeconds)
		// The suite is to run beside the Services, not beside a proxy still writing them.
		tw := time.Now()
		if err := st.WaitProxiesSynced(ctx, o.Timeout); err != nil {
			run.Error = fmt.Sprintf("background services: kube-proxy did not program them: %v", err)
			return run
		}
		run.BackgroundSyncSeconds = time.Since(tw).Seconds()
		log.Info("background Services programmed on every node", "seconds", run.BackgroundSyncSeconds)
	}

	kubeconfig, err := st.ControlPlane().AdminKubeconfig()
	if err != nil {
		run.Error = err.Error()
		return run
	}
	client, ok := st.Lab().Host(lab.ClientName(0))
	if !ok {
		run.Error = "cluster has no client host to run e2e.test from"
		return run
	}
	bin, args := command(o, bins, dir, []string{
		"--kubeconfig=" + kubeconfig, "--provider=local", "--kubectl-path=" + bins.kubectl,
		// Tests that need several nodes read the count from this flag, as on kind and
		// local-up clusters (without it they skip: "Requires at least 2 nodes (not -1)").
		"--num-nodes=" + strconv.Itoa(o.Nodes),
	}, false)
	ectx, cancel := context.WithTimeout(ctx, o.Timeout+interruptGrace+time.Minute)
	defer cancel()
	log.Info("running e2e.test", "focus", o.Focus, "skip", o.skipPattern(), "from", client.Name)
	te := time.Now()
	err = runE2ETest(ectx, client.NetNSPath, bin, args, dir, o.Progress)
	run.E2ESeconds = time.Since(te).Seconds()
	if ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", ctx.Err())
	} else if ectx.Err() != nil {
		err = fmt.Errorf("did not end within --timeout %s: %w", o.Timeout, ectx.Err())
	}
	readSuite(&run, o.Out, dir, err)
	return run
}

func errorOf(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// command returns the program and arguments of a run: e2e.test itself with ginkgo's flags
// as --ginkgo.*, or, with o.Parallel above 1, the ginkgo CLI running it in that many
// processes (as upstream's hack/ginkgo-e2e.sh does). e2eArgs are e2e.test's own flags.
func command(o Options, bins binaryPaths, dir string, e2eArgs []string, dryRun bool) (string, []string) {
	ginkgoFlags := []string{"focus=" + o.Focus, "skip=" + o.skipPattern(), "timeout=" + o.Timeout.String(), "no-color"}
	if dryRun {
		ginkgoFlags = append(ginkgoFlags, "dry-run")
	}
	e2eArgs = append(e2eArgs, "--report-dir="+dir, "--disable-log-dump")
	if o.Parallel <= 1 {
		var args []string
		for _, f := range ginkgoFlags {
			args = append(args, "--ginkgo."+f)
		}
		return bins.e2eTest, append(args, e2eArgs...)
	}
	args := []string{"run", "--procs=" + strconv.Itoa(o.Parallel)}
	for _, f := range ginkgoFlags {
		args = append(args, "--"+f)
	}
	args = append(args, bins.e2eTest, "--")
	return bins.ginkgo, append(args, e2eArgs...)
}

// readSuite fills run's JUnit, Log and Suite from dir; runErr is how e2e.test ended. A
// non-zero exit with a JUnit report is the failed tests speaking; without one it is an
// error of the run.
func readSuite(run *ModeRun, out, dir string, runErr error) {
	rel := func(p string) string {
		if r, err := filepath.Rel(out, p); err == nil {
			return r
		}
		return p
	}
	run.Log = rel(filepath.Join(dir, LogFile))
	junit := filepath.Join(dir, JUnitFile)
	f, err := os.Open(junit)
	if err != nil {
		msg := "e2e.test wrote no " + JUnitFile
		if runErr != nil {
			msg = "e2e.test: " + runErr.Error() + "; it wrote no " + JUnitFile
		}
		run.Error = msg + " (see " + run.Log + ")"
		return
	}
	defer f.Close()
	run.JUnit = rel(junit)
	s, err := ParseJUnit(f)
	if err != nil {
		run.Error = err.Error()
		return
	}
	run.Suite = s
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		run.Error = "e2e.test: " + runErr.Error()
	}
}

// runE2ETest runs e2e.test with args from a thread inside the namespace nsPath ("" for the
// calling one), its output into dir/e2e.log and progress, and waits for it. When ctx ends
// it gets SIGINT (ginkgo runs the cleanup and writes its report), then, after
// interruptGrace, SIGKILL with every process it started (its own process group). Its
// parent-death signal makes it die with kpbench.
//
// Equivalent to: `ip netns exec $client e2e.test $args 2>&1 | tee $dir/e2e.log`.
func runE2ETest(ctx context.Context, nsPath, bin string, args []string, dir string, progress io.Writer) error {
	logf, err := os.Create(filepath.Join(dir, LogFile))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = io.MultiWriter(logf, progress)
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logf, "# %s %q\n", bin, args)
	start := func() error { return cmd.Start() }
	if nsPath != "" {
		w, err := netns.StartWorker(nsPath)
		if err != nil {
			return err
		}
		// The worker's thread is e2e.test's parent for the parent-death signal: it must
		// live until e2e.test has exited.
		defer w.Stop()
		start = func() error {
			return w.Run(ctx, func() error {
				if err := netns.Guard(); err != nil {
					return err
				}
				return cmd.Start()
			})
		}
	}
	if err := start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	pgid := -cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGINT)
	t := time.NewTimer(interruptGrace)
	defer t.Stop()
	select {
	case err := <-done:
		_ = syscall.Kill(pgid, syscall.SIGKILL) // kubectl children it left
		return err
	case <-t.C:
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	return <-done
}

// pidName is the default cluster name's suffix: the process id in base 36.
func pidName(pid int) string { return strconv.FormatInt(int64(pid), 36) }
