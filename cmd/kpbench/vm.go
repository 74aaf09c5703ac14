//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/microvm"
	"kpbench.dev/kpbench/reports"
)

// vmFlags are the flags shared by the vm subcommands.
type vmFlags struct {
	kernels  []string
	mem      string
	cpus     int
	timeout  time.Duration
	accel    string
	cacheDir string
	writable []string
	append   []string
	debug    bool
	mttcg    bool
}

// addVMFlags registers the flags; multiKernel documents --kernel as a matrix.
func addVMFlags(cmd *cobra.Command, f *vmFlags, multiKernel bool) {
	fl := cmd.Flags()
	kernelHelp := "Debian kernel version (linux-image-VERSION-amd64) (default " + microvm.DefaultKernel + ")"
	if multiKernel {
		kernelHelp = "Debian kernel version (linux-image-VERSION-amd64); repeat for a kernel matrix (default " + microvm.DefaultKernel + ")"
	}
	fl.StringArrayVar(&f.kernels, "kernel", nil, kernelHelp)
	fl.StringVar(&f.mem, "mem", "2G", "guest memory: MiB, or a number with M or G (768M is the least for 100k-rule nft restores)")
	fl.IntVar(&f.cpus, "cpus", microvm.DefaultCPUs, "guest CPUs (1 to 64)")
	fl.DurationVar(&f.timeout, "timeout", microvm.DefaultTimeout, "kill the guest after this long, boot included")
	fl.StringVar(&f.accel, "accel", "", "tcg or kvm (default $"+microvm.EnvAccel+", else tcg; kvm hangs on some hosts)")
	fl.StringVar(&f.cacheDir, "cache-dir", microvm.DefaultCacheDir, "kernel and initramfs cache")
	fl.StringArrayVar(&f.writable, "writable", nil, "host directory shared writable at the same path (repeatable; default $"+microvm.EnvWritable+" (':'-separated), else the working directory)")
	fl.BoolVar(&f.debug, "debug", false, "show kernel messages and init's steps on stderr")
	fl.BoolVar(&f.mttcg, "tcg-multi-thread", false, "run each vCPU on its own host thread (QEMU's default; Debian 6.12 guests crash under it with \"Oops: int3\")")
	fl.StringArrayVar(&f.append, "append", nil, "add a word to the guest kernel's command line, e.g. nohz=off (repeatable; default $"+microvm.EnvAppend+")")
}

// configs returns one microvm.Config per kernel, validated (bad values are usage errors).
// extraWritable directories are shared writable in addition to the default ones.
func (f *vmFlags) configs(cmd *cobra.Command, extraWritable []string) ([]microvm.Config, error) {
	mem, err := parseMemMB(f.mem)
	if err != nil {
		return nil, badInput("--mem: %v", err)
	}
	if f.accel != "" && f.accel != microvm.AccelTCG && f.accel != microvm.AccelKVM {
		return nil, badInput("--accel %q: want %s or %s", f.accel, microvm.AccelTCG, microvm.AccelKVM)
	}
	if f.cpus < 1 {
		return nil, badInput("--cpus %d: want 1 to 64", f.cpus)
	}
	if f.timeout <= 0 {
		return nil, badInput("--timeout %s: want a positive duration such as 30m", f.timeout)
	}
	writable := f.writable
	if len(writable) == 0 {
		if env := os.Getenv(microvm.EnvWritable); env != "" {
			writable = strings.Split(env, ":")
		}
	}
	if len(extraWritable) > 0 {
		if len(writable) == 0 {
			cwd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("vm: %w", err)
			}
			if cwd != "/" {
				writable = append(writable, cwd)
			}
		}
		writable = append(writable, extraWritable...)
	}
	kernels := f.kernels
	if len(kernels) == 0 {
		kernels = []string{microvm.DefaultKernel}
	}
	var out []microvm.Config
	for _, k := range kernels {
		c := microvm.Config{
			Kernel: k, MemoryMB: mem, CPUs: f.cpus, CacheDir: f.cacheDir, Timeout: f.timeout,
			Accel: f.accel, Writable: writable, Debug: f.debug, Append: f.append, MultiThreadTCG: f.mttcg,
			Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
		}
		if err := c.Validate(); err != nil {
			return nil, usageError{err}
		}
		out = append(out, c)
	}
	return out, nil
}

// parseMemMB reads a memory size in MiB: 2048, 2048M, 2G.
func parseMemMB(s string) (int, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		s string
		m int
	}{{"GIB", 1024}, {"GB", 1024}, {"G", 1024}, {"MIB", 1}, {"MB", 1}, {"M", 1}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSuffix(u, suf.s), suf.m
			break
		}
	}
	n, err := strconv.Atoi(u)
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, fmt.Errorf("%q: want a size such as 2G, 1536M or 1024 (MiB)", s)
	}
	if n*mult < 256 {
		return 0, fmt.Errorf("%q: want at least 256M", s)
	}
	return n * mult, nil
}

// outDirs returns the directories named by --out in kpbench arguments; they are created on
// the host and shared writable, so that the guest's results come back.
func outDirs(args []string) []string {
	var dirs []string
	for i, a := range args {
		switch {
		case a == "--":
			return dirs
		case a == "--out" && i+1 < len(args):
			dirs = append(dirs, args[i+1])
		case strings.HasPrefix(a, "--out="):
			dirs = append(dirs, strings.TrimPrefix(a, "--out="))
		}
	}
	return dirs
}

// dashArgs returns the arguments after `--`, or a usage error when there are none or some
// come before it.
func dashArgs(cmd *cobra.Command, args []string, what, example string) ([]string, error) {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 || len(args) == dash {
		return nil, badInput("give the %s after --, e.g. '%s -- %s'", what, cmd.CommandPath(), example)
	}
	if dash > 0 {
		return nil, badInput("unexpected arguments before --: %q", args[:dash])
	}
	return args, nil
}

// perKernelOut rewrites every --out DIR of kpbench arguments (before a `--`) to
// DIR/<kernel>, so that a kernel matrix leaves one results directory per kernel instead of
// each kernel overwriting the last.
func perKernelOut(args []string, kernel string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		switch a := out[i]; {
		case a == "--":
			return out
		case a == "--out" && i+1 < len(out):
			out[i+1] = filepath.Join(out[i+1], kernel)
			i++
		case strings.HasPrefix(a, "--out="):
			out[i] = "--out=" + filepath.Join(strings.TrimPrefix(a, "--out="), kernel)
		}
	}
	return out
}

// vmRunner boots one VM and runs argv in it: microvm.RunOutcome, or a fake in tests.
type vmRunner func(ctx context.Context, cfg microvm.Config, argv []string) (microvm.Outcome, error)

// kernelRun is the outcome of one kernel of a vm run or exec.
type kernelRun struct {
	kernel  string
	outcome microvm.Outcome
	err     error // the VM failed (no exit status), or its logs could not be recorded
	elapsed time.Duration
}

// runVMs runs argv once per config, each kernel in turn, printing a header per kernel when
// there are several. Every kernel runs, whatever the ones before it did; a summary of every
// kernel's outcome follows. With perKernel and several kernels, every --out DIR of argv
// becomes DIR/<kernel>. The first --out directory (per kernel) also receives the VM's logs
// (vm-console.log, kernel-log.txt), and the kernel-log labels in its results.json.
//
// The error is the VM failure when one kernel was asked for; with several, it names every
// kernel whose VM failed. Otherwise it is the first non-zero exit status as exitCodeError.
func runVMs(cmd *cobra.Command, cfgs []microvm.Config, argv []string, perKernel bool, run vmRunner) error {
	var runs []kernelRun
	matrix := len(cfgs) > 1
	for _, c := range cfgs {
		argv := argv
		if matrix {
			fmt.Fprintf(cmd.ErrOrStderr(), "=== kpbench vm: kernel %s ===\n", c.Kernel)
			if perKernel {
				argv = append(argv[:1:1], perKernelOut(argv[1:], c.Kernel)...)
			}
		}
		if perKernel {
			if outs := outDirs(argv[1:]); len(outs) > 0 {
				c.LogDir = outs[0]
			}
		}
		start := time.Now()
		o, err := run(cmd.Context(), c, argv)
		r := kernelRun{kernel: c.Kernel, outcome: o, err: err, elapsed: time.Since(start)}
		if err == nil && c.LogDir != "" {
			if lerr := recordKernelLog(c.LogDir, o); lerr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "kpbench vm: kernel %s: %v\n", c.Kernel, lerr)
			}
		}
		if matrix {
			fmt.Fprintf(cmd.ErrOrStderr(), "=== kpbench vm: kernel %s: %s in %s ===\n",
				c.Kernel, r.status(), r.elapsed.Round(time.Millisecond))
		}
		runs = append(runs, r)
		if cmd.Context().Err() != nil {
			break // interrupted: the other kernels do not start
		}
	}
	if matrix {
		printKernelRuns(cmd.ErrOrStderr(), runs, len(cfgs))
	}
	var failed []string
	firstCode := 0
	for _, r := range runs {
		switch {
		case r.err != nil:
			failed = append(failed, fmt.Sprintf("%v", vmError(r.kernel, r.err)))
		case r.outcome.ExitCode != 0 && firstCode == 0:
			firstCode = r.outcome.ExitCode
		}
	}
	switch {
	case !matrix && len(failed) == 1:
		return vmError(runs[0].kernel, runs[0].err)
	case len(failed) > 0:
		return fmt.Errorf("vm: %d of %d kernels failed to run:\n%s", len(failed), len(cfgs), strings.Join(failed, "\n"))
	case len(runs) < len(cfgs):
		return fmt.Errorf("vm: interrupted after %d of %d kernels: %w", len(runs), len(cfgs), cmd.Context().Err())
	case firstCode != 0:
		return exitCodeError{firstCode}
	}
	return nil
}

// status is "exit status N" or "VM failed".
func (r kernelRun) status() string {
	if r.err != nil {
		return "VM failed"
	}
	return fmt.Sprintf("exit status %d", r.outcome.ExitCode)
}

// printKernelRuns writes the matrix summary: one line per kernel with its outcome, time,
// kernel log events and the logs kept.
func printKernelRuns(w io.Writer, runs []kernelRun, asked int) {
	fmt.Fprintf(w, "=== kpbench vm: %d kernels ===\n", asked)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tOUTCOME\tTIME\tKERNEL LOG\tLOGS")
	for _, r := range runs {
		klog := r.outcome.KernelLog.Summary()
		if r.err != nil && len(r.outcome.KernelLog.Events) == 0 {
			klog = "-"
		}
		logs := strings.TrimSpace(r.outcome.ConsoleLog + " " + r.outcome.KernelLogPath)
		if logs == "" {
			logs = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.kernel, r.status(), r.elapsed.Round(time.Second), klog, logs)
	}
	tw.Flush()
}

// Labels the vm commands add to every run of the results.json in a kernel's --out
// directory, from the guest kernel's log while the command ran.
const (
	labelKernelLog        = "kernel-log"             // file name of the log beside results.json
	labelKernelLogSummary = "kernel-log-summary"     // "clean", or "2 warnings, 1 soft lockup (max 23s)"
	labelKernelWarnings   = "kernel-warnings"        // WARN() splats
	labelKernelLockups    = "kernel-soft-lockups"    // watchdog soft lockups
	labelKernelLockupMax  = "kernel-soft-lockup-max" // longest soft lockup, e.g. "23s"
)

// recordKernelLog records the kernel log's summary as labels on every run of
// dir/results.json. A directory without results.json (the command wrote none) is left alone.
func recordKernelLog(dir string, o microvm.Outcome) error {
	if o.KernelLogPath == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, reports.ResultsFile)); err != nil {
		return nil
	}
	res, err := reports.Load(dir)
	if err != nil {
		return fmt.Errorf("label kernel log: %w", err)
	}
	k := o.KernelLog
	for _, run := range res.Runs {
		res.Label(run.Backend, labelKernelLog, filepath.Base(o.KernelLogPath))
		res.Label(run.Backend, labelKernelLogSummary, k.Summary())
		res.Label(run.Backend, labelKernelWarnings, strconv.Itoa(k.Count(microvm.EventWarning)))
		res.Label(run.Backend, labelKernelLockups, strconv.Itoa(k.Count(microvm.EventSoftLockup)))
		if m := k.MaxStuck(); m > 0 {
			res.Label(run.Backend, labelKernelLockupMax, m.String())
		}
	}
	if err := res.Write(dir); err != nil {
		return fmt.Errorf("label kernel log: %w", err)
	}
	return nil
}

// vmError adds the kernel and, for a missing tool, the package list to err.
func vmError(kernel string, err error) error {
	if errors.Is(err, microvm.ErrMissingTool) {
		return fmt.Errorf("vm kernel %s: %w (make deps installs: %s)", kernel, err, strings.Join(microvm.HostPackages(), " "))
	}
	return fmt.Errorf("vm kernel %s: %w", kernel, err)
}

func newVMCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "Run kpbench or any host binary in a microVM whose kernel has IPVS",
		Long: `The host kernel may lack IPVS (and cannot load modules). 'kpbench vm' boots a stock Debian
kernel under QEMU (TCG software emulation unless --accel kvm), with the host's / read-only
underneath a RAM overlay and the working directory (or the --writable directories) shared
writable, and runs one command inside. Output streams back; the exit status is the command's.
The first use downloads the kernel package (~70 MB) into --cache-dir.

Figures measured in the VM are slower than native (7-9x for kernel programming under TCG):
compare backends within the same VM, not with host numbers. Inside, KPBENCH_IN_VM=1,
KPBENCH_VM_ACCEL and KPBENCH_VM_KERNEL label the results.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return badInput("missing subcommand: run, exec or prepare")
		},
	}
	cmd.AddCommand(newVMRunCmd(), newVMExecCmd(), newVMPrepareCmd())
	return cmd
}

func newVMRunCmd() *cobra.Command {
	var f vmFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- KPBENCH-ARGS...",
		Short: "Run this kpbench binary with the given arguments in the VM, once per --kernel",
		Long: `Run this kpbench binary with the given arguments in the VM, once per --kernel.

The --out directory is created on the host and shared writable, so results land on the host.
A kernel matrix (--kernel given more than once) runs the same arguments on each kernel in
turn and writes each kernel's results to OUT/<kernel> (e.g. out/vm/6.1.0-57 and
out/vm/6.12.118+deb12); every results.json records the guest's kernel release and the
accelerator, so compare backends within one directory and kernels with 'kpbench compare'.
Every kernel runs even when one before it fails; a table of every kernel's outcome ends the
output.

Beside each results.json, vm-console.log holds the guest's serial console and kernel-log.txt
the guest kernel's log (dmesg) when the command ended. Kernel warnings, soft lockups, RCU
stalls, hung tasks, OOM kills and oopses logged while the command ran are counted, printed,
and recorded as labels of every run in results.json: kernel-log-summary, kernel-warnings,
kernel-soft-lockups, kernel-soft-lockup-max, kernel-log. A guest that dies (a kernel panic,
the timeout) keeps its whole console log, and the error names the file.`,
		Example: `  kpbench vm run -- check --help
  kpbench vm run -- conform --backend ipvs --out out/conform-ipvs
  kpbench vm run --kernel 6.1.0-57 --kernel 6.12.118+deb12 -- run scenarios/kernel-matrix.yaml --backend iptables,nftables,ipvs --out out/km`,
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := dashArgs(cmd, args, "kpbench arguments", "check --help")
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("vm run: find this binary: %w", err)
			}
			outs := outDirs(args)
			cfgs, err := f.configs(cmd, outs)
			if err != nil {
				return err
			}
			for _, d := range outs {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return fmt.Errorf("vm run: --out %s: %w", d, err)
				}
			}
			return runVMs(cmd, cfgs, append([]string{self}, args...), true, microvm.RunOutcome)
		},
	}
	addVMFlags(cmd, &f, true)
	return cmd
}

func newVMExecCmd() *cobra.Command {
	var f vmFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] -- BINARY ARGS...",
		Short: "Run a host binary in the VM (go test -exec 'kpbench vm exec --')",
		Example: `  go test -exec 'kpbench vm exec --' ./backends/ipvs/
  kpbench vm exec -- /bin/sh -c 'ipvsadm -Ln'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := dashArgs(cmd, args, "command", "/bin/sh -c 'cat /proc/net/ip_vs'")
			if err != nil {
				return err
			}
			if len(f.kernels) > 1 {
				return badInput("vm exec takes one --kernel ('vm run' runs a kernel matrix)")
			}
			bin, err := exec.LookPath(args[0])
			if err != nil {
				return badInput("vm exec: %v", err)
			}
			if bin, err = filepath.Abs(bin); err != nil {
				return badInput("vm exec: %v", err)
			}
			cfgs, err := f.configs(cmd, nil)
			if err != nil {
				return err
			}
			return runVMs(cmd, cfgs, append([]string{bin}, args[1:]...), false, microvm.RunOutcome)
		},
	}
	addVMFlags(cmd, &f, false)
	return cmd
}

func newVMPrepareCmd() *cobra.Command {
	var f vmFlags
	cmd := &cobra.Command{
		Use:   "prepare [--kernel VERSION ...]",
		Short: "Download the kernels and build their initramfs into the cache, without booting",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfgs, err := f.configs(cmd, nil)
			if err != nil {
				return err
			}
			for _, c := range cfgs {
				start := time.Now()
				img, err := microvm.EnsureKernel(cmd.Context(), c)
				if err != nil {
					return vmError(c.Kernel, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\t%s\n", c.Kernel, img.Vmlinux, img.Initramfs,
					time.Since(start).Round(time.Millisecond))
			}
			return nil
		},
	}
	addVMFlags(cmd, &f, true)
	return cmd
}
