//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/microvm"
	"kpbench.dev/kpbench/reports"
)

// runVMCLI runs the root command with the vm subcommand (added here if root.go does not
// wire it yet) and maps the error to an exit code the way run does.
func runVMCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	if c, _, err := root.Find([]string{"vm"}); err != nil || c == root {
		root.AddCommand(newVMCmd())
	}
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nsee '%s --help'", err, c.CommandPath())}
	})
	err := root.ExecuteContext(context.Background())
	var ue usageError
	var ce exitCodeError
	switch {
	case err == nil:
		code = exitOK
	case errors.As(err, &ce):
		code = ce.code
	case errors.As(err, &ue):
		code = exitBadInput
	default:
		code = exitError
	}
	if err != nil {
		fmt.Fprintln(&errOut, "kpbench:", err)
	}
	return code, out.String(), errOut.String()
}

func TestVMBadInput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no subcommand", []string{"vm"}, "missing subcommand"},
		{"run without dash", []string{"vm", "run"}, "after --"},
		{"run empty after dash", []string{"vm", "run", "--"}, "after --"},
		{"args before dash", []string{"vm", "exec", "true", "--", "x"}, "before --"},
		{"bad mem", []string{"vm", "run", "--mem", "lots", "--", "version"}, "--mem"},
		{"tiny mem", []string{"vm", "run", "--mem", "64M", "--", "version"}, "at least 256M"},
		{"bad accel", []string{"vm", "exec", "--accel", "hvf", "--", "true"}, "want tcg or kvm"},
		{"bad kernel", []string{"vm", "prepare", "--kernel", "latest"}, "Debian kernel version"},
		{"kernel with flavour", []string{"vm", "prepare", "--kernel", "6.1.0-57-amd64"}, "without the -amd64"},
		{"bad cpus", []string{"vm", "exec", "--cpus", "0", "--", "true"}, "--cpus 0"},
		{"bad timeout", []string{"vm", "exec", "--timeout", "-1s", "--", "true"}, "--timeout"},
		{"exec matrix", []string{"vm", "exec", "--kernel", "6.1.0-57", "--kernel", "6.1.0-50", "--", "true"}, "one --kernel"},
		{"exec unknown binary", []string{"vm", "exec", "--", "/nonexistent/bin"}, "vm exec"},
		{"unknown flag", []string{"vm", "run", "--bogus", "--", "version"}, "unknown flag"},
		{"prepare stray arg", []string{"vm", "prepare", "x"}, "accepts 0 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runVMCLI(t, tt.args...)
			assert.Equal(t, exitBadInput, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tt.wantErr)
		})
	}
}

func TestParseMemMB(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"2G", 2048, false}, {"2g", 2048, false}, {"1536M", 1536, false}, {"1024", 1024, false},
		{"1GiB", 1024, false}, {"768MB", 768, false},
		{"", 0, true}, {"G", 0, true}, {"-1G", 0, true}, {"1.5G", 0, true}, {"100M", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseMemMB(tt.in)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestOutDirs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"none", []string{"check", "--backend", "ipvs"}, nil},
		{"separate", []string{"run", "x.yaml", "--out", "out/a"}, []string{"out/a"}},
		{"equals", []string{"run", "--out=out/b", "x.yaml"}, []string{"out/b"}},
		{"after dash ignored", []string{"lab", "exec", "--", "x", "--out", "y"}, nil},
		{"dangling", []string{"run", "--out"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, outDirs(tt.args))
		})
	}
}

func TestPerKernelOut(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"none", []string{"check", "f.yaml"}, []string{"check", "f.yaml"}},
		{"separate", []string{"run", "x.yaml", "--out", "out/a", "--backend", "ipvs"}, []string{"run", "x.yaml", "--out", "out/a/6.1.0-57", "--backend", "ipvs"}},
		{"equals", []string{"run", "--out=out/b", "x.yaml"}, []string{"run", "--out=out/b/6.1.0-57", "x.yaml"}},
		{"after dash kept", []string{"lab", "exec", "--", "x", "--out", "y"}, []string{"lab", "exec", "--", "x", "--out", "y"}},
		{"dangling", []string{"run", "--out"}, []string{"run", "--out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.args)
			assert.Equal(t, tt.want, perKernelOut(tt.args, "6.1.0-57"))
			assert.Equal(t, in, tt.args, "the input is not modified")
		})
	}
}

// TestVMExecExitStatus boots the VM through the CLI: the guest command's exit status and
// output come back.
func TestVMExecExitStatus(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "qemu-system-x86_64")
	if os.Getenv(microvm.EnvInVM) == "1" {
		t.Skip("already inside the VM")
	}
	code, stdout, stderr := runVMCLI(t, "vm", "exec", "--mem", "1G", "--cpus", "1", "--timeout", "3m", "--",
		"/bin/sh", "-c", "echo in-vm $KPBENCH_IN_VM; exit 3")
	assert.Equal(t, 3, code, "stderr: %s", stderr)
	assert.Equal(t, "in-vm 1\n", stdout)
}

// fakeVMs is a vmRunner that fails the VM of the kernels in fail and returns exit status
// code[kernel] for the others, recording every call.
type fakeVMs struct {
	fail  map[string]bool
	code  map[string]int
	calls []fakeVMCall
}

type fakeVMCall struct {
	kernel, logDir string
	argv           []string
}

func (f *fakeVMs) run(_ context.Context, cfg microvm.Config, argv []string) (microvm.Outcome, error) {
	f.calls = append(f.calls, fakeVMCall{cfg.Kernel, cfg.LogDir, argv})
	if f.fail[cfg.Kernel] {
		return microvm.Outcome{ExitCode: -1, ConsoleLog: "/tmp/console-" + cfg.Kernel + ".log"},
			errors.New("the guest stopped without an exit status; Kernel panic - not syncing: Fatal exception in interrupt")
	}
	return microvm.Outcome{ExitCode: f.code[cfg.Kernel]}, nil
}

func TestRunVMsRunsEveryKernel(t *testing.T) {
	k61, k612, k50 := "6.1.0-57", "6.12.118+deb12", "6.1.0-50"
	tests := []struct {
		name      string
		kernels   []string
		fail      map[string]bool
		code      map[string]int
		wantCode  int // exit code of the command, as main maps the error
		wantErr   []string
		wantTable []string
	}{
		{"first kernel panics, the others still run", []string{k61, k612, k50},
			map[string]bool{k61: true}, map[string]int{k50: 4}, exitError,
			[]string{"1 of 3 kernels failed to run", "vm kernel 6.1.0-57", "Fatal exception"},
			[]string{"6.1.0-57 +VM failed", "6.12.118\\+deb12 +exit status 0", "6.1.0-50 +exit status 4"}},
		{"middle kernel panics", []string{k61, k612, k50}, map[string]bool{k612: true}, nil, exitError,
			[]string{"1 of 3 kernels failed to run", "vm kernel 6.12.118+deb12"},
			[]string{"6.12.118\\+deb12 +VM failed .*/tmp/console-6.12.118\\+deb12.log"}},
		{"all pass", []string{k61, k612}, nil, nil, exitOK, nil, []string{"6.1.0-57 +exit status 0 .*clean"}},
		{"first non-zero exit status wins", []string{k61, k612, k50}, nil, map[string]int{k612: 1, k50: 7}, 1, nil, nil},
		{"one kernel: the VM error itself", []string{k612}, map[string]bool{k612: true}, nil, exitError,
			[]string{"vm kernel 6.12.118+deb12: the guest stopped"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeVMs{fail: tt.fail, code: tt.code}
			var cfgs []microvm.Config
			for _, k := range tt.kernels {
				cfgs = append(cfgs, microvm.Config{Kernel: k})
			}
			var stderr bytes.Buffer
			cmd := &cobra.Command{}
			cmd.SetContext(context.Background())
			cmd.SetErr(&stderr)
			err := runVMs(cmd, cfgs, []string{"/bin/kpbench", "run", "x.yaml", "--out", "out/m"}, true, f.run)

			require.Len(t, f.calls, len(tt.kernels), "every kernel runs")
			for i, c := range f.calls {
				want := "out/m"
				if len(tt.kernels) > 1 {
					want = "out/m/" + tt.kernels[i]
				}
				assert.Equal(t, want, c.logDir, "the kernel's results directory keeps its logs")
				assert.Equal(t, want, c.argv[4])
			}
			var ce exitCodeError
			switch {
			case tt.wantCode == exitOK:
				assert.NoError(t, err)
			case tt.wantCode == exitError:
				require.Error(t, err)
				assert.False(t, errors.As(err, &ce), "a VM failure is an error, not an exit status")
			default:
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.wantCode, ce.code)
			}
			for _, w := range tt.wantErr {
				assert.ErrorContains(t, err, w)
			}
			for _, w := range tt.wantTable {
				assert.Regexp(t, w, stderr.String())
			}
		})
	}
}

func TestRunVMsStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	run := func(context.Context, microvm.Config, []string) (microvm.Outcome, error) {
		calls++
		cancel()
		return microvm.Outcome{ExitCode: -1}, errors.New("vm run: context canceled")
	}
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	cmd.SetErr(io.Discard)
	err := runVMs(cmd, []microvm.Config{{Kernel: "6.1.0-57"}, {Kernel: "6.12.118+deb12"}}, []string{"/bin/true"}, false, run)
	assert.Equal(t, 1, calls, "no kernel starts after Ctrl-C")
	assert.ErrorContains(t, err, "1 of 2 kernels failed")
}

func TestRecordKernelLog(t *testing.T) {
	dir := t.TempDir()
	res := &reports.Results{Scenario: "x"}
	res.Add("nftables", reports.Measurement{Name: reports.MeasureSync, Unit: "s", Samples: []float64{1}})
	res.Add("ipvs", reports.Measurement{Name: reports.MeasureSync, Unit: "s", Samples: []float64{2}})
	require.NoError(t, res.Write(dir))
	klog, err := microvm.ScanKernelLog(strings.NewReader("[1.0] kpbench-vm: command start\n" +
		"[30.0] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [nft:9]\n" +
		"[31.0] WARNING: CPU: 0 PID: 9 at net/netfilter/x.c:1 f+0x0/0x1\n"))
	require.NoError(t, err)
	o := microvm.Outcome{KernelLog: klog, KernelLogPath: filepath.Join(dir, microvm.KernelLogFile)}
	require.NoError(t, recordKernelLog(dir, o))

	got, err := reports.Load(dir)
	require.NoError(t, err)
	require.Len(t, got.Runs, 2)
	for _, r := range got.Runs {
		assert.Equal(t, map[string]string{
			"kernel-log":             "kernel-log.txt",
			"kernel-log-summary":     "1 warning, 1 soft lockup (max 26s)",
			"kernel-warnings":        "1",
			"kernel-soft-lockups":    "1",
			"kernel-soft-lockup-max": "26s",
		}, r.Labels, r.Backend)
	}

	empty := t.TempDir()
	require.NoError(t, recordKernelLog(empty, o), "no results.json: nothing to label")
	_, err = os.Stat(filepath.Join(empty, reports.ResultsFile))
	assert.True(t, os.IsNotExist(err))
}
