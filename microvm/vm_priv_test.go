//go:build linux

package microvm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
)

// privConfig is the Config of the privileged tests: the default cache (so the first run
// builds it, later runs reuse it), small guests, a timeout well below the test's.
func privConfig(t *testing.T) Config {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, qemuBinary, "busybox", "cpio", "depmod", "xz", "strip", "apt-get", "dpkg-deb")
	if os.Getenv(EnvInVM) == "1" {
		t.Skip("already inside the VM")
	}
	return Config{MemoryMB: 1024, CPUs: 1, Timeout: 3 * time.Minute}
}

// TestRunInVM boots the VM once per case and checks the exit status, the streamed output,
// the guest kernel's IPVS modules, the labels and the writable directory (three boots).
func TestRunInVM(t *testing.T) {
	cfg := privConfig(t)
	ctx := context.Background()
	start := time.Now()
	img, err := EnsureKernel(ctx, cfg)
	require.NoError(t, err)
	t.Logf("EnsureKernel: %s (%s)", time.Since(start).Round(time.Millisecond), img.Initramfs)

	out := t.TempDir()
	tests := []struct {
		name     string
		argv     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"ipvs, modules and labels", []string{"/bin/sh", "-c",
			`cat /proc/net/ip_vs >/dev/null && echo ok &&
			 grep -q '^ip_vs ' /proc/modules && grep -q '^ip_vs_mh ' /proc/modules && grep -q '^br_netfilter ' /proc/modules &&
			 echo "$KPBENCH_IN_VM $KPBENCH_VM_ACCEL $KPBENCH_VM_KERNEL $(uname -r)" && echo result >` + filepath.Join(out, "r.txt")},
			0, "ok\n1 tcg " + DefaultKernel + " " + DefaultKernel + "-amd64\n", ""},
		{"failing command", []string{"/bin/sh", "-c", "echo bad >&2; exit 7"}, 7, "", "bad\n"},
		{"missing binary", []string{"/nonexistent/x"}, 127, "", "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			c := cfg
			c.Stdout, c.Stderr, c.Writable = &stdout, &stderr, []string{out}
			start := time.Now()
			o, err := RunOutcome(ctx, c, tc.argv)
			t.Logf("boot+run: %s", time.Since(start).Round(time.Millisecond))
			require.NoError(t, err)
			assert.Equal(t, tc.wantCode, o.ExitCode, "stderr: %s", stderr.String())
			assert.Equal(t, tc.wantOut, stdout.String())
			assert.Contains(t, stderr.String(), tc.wantErr)
		})
	}
	b, err := os.ReadFile(filepath.Join(out, "r.txt"))
	require.NoError(t, err, "a file written in the writable directory must reach the host")
	assert.Equal(t, "result\n", string(b))
}

// TestRunTimeout checks that a hung guest is killed and reported, with its console kept.
// (Streaming is checked by TestRunInVM: on a loaded machine the boot alone may outlast this
// timeout.)
func TestRunTimeout(t *testing.T) {
	cfg := privConfig(t)
	cfg.Timeout = 20 * time.Second
	cfg.LogDir = t.TempDir()
	start := time.Now()
	_, err := RunOutcome(context.Background(), cfg, []string{"/bin/sh", "-c", "echo started; exec sleep 1000"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed after the timeout of 20s")
	assert.Contains(t, err.Error(), filepath.Join(cfg.LogDir, ConsoleLogFile))
	assert.Less(t, time.Since(start), cfg.Timeout+15*time.Second)
}

// TestRunGuestPanicKeepsConsole makes the guest kernel panic on purpose (no init to run) and
// checks that the error names a file holding the whole console log, panic included, both
// with a log directory and without one (a temporary file). The guest boots quiet, so the
// console holds the panic and what the kernel printed at error level.
func TestRunGuestPanicKeepsConsole(t *testing.T) {
	cfg := privConfig(t)
	cfg.Timeout = 2 * time.Minute
	cfg.Append = []string{"rdinit=/kpbench-no-such-init"}
	for _, logDir := range []string{t.TempDir(), ""} {
		t.Run("logdir="+logDir, func(t *testing.T) {
			c := cfg
			c.LogDir = logDir
			o, err := RunOutcome(context.Background(), c, []string{"/bin/true"})
			require.Error(t, err)
			assert.Equal(t, -1, o.ExitCode)
			require.NotEmpty(t, o.ConsoleLog)
			t.Cleanup(func() {
				if logDir == "" {
					os.Remove(o.ConsoleLog)
				}
			})
			if logDir != "" {
				assert.Equal(t, filepath.Join(logDir, ConsoleLogFile), o.ConsoleLog)
			}
			assert.Contains(t, err.Error(), ": "+o.ConsoleLog+"; its tail:")
			assert.Contains(t, err.Error(), "Kernel panic", "the tail is still in the error")
			b, rerr := os.ReadFile(o.ConsoleLog)
			require.NoError(t, rerr)
			assert.Contains(t, string(b), "Kernel panic")
			assert.Contains(t, string(b), "Call Trace:")
		})
	}
}

// TestRunKernelLog checks that the guest kernel's log while the command ran comes back,
// with a warning the command provoked (a WARN-level line written to /dev/kmsg is not a
// WARN() splat, so the test writes the splat's first line itself) and the boot left out.
func TestRunKernelLog(t *testing.T) {
	cfg := privConfig(t)
	cfg.LogDir = t.TempDir()
	o, err := RunOutcome(context.Background(), cfg, []string{"/bin/sh", "-c",
		`echo "WARNING: CPU: 0 PID: 1 at kpbench/test.c:1 provoked+0x0/0x1" >/dev/kmsg`})
	require.NoError(t, err)
	assert.Equal(t, 0, o.ExitCode)
	assert.True(t, o.KernelLog.Marked, "init marks the command's start")
	assert.Equal(t, 1, o.KernelLog.Count(EventWarning), "events: %+v", o.KernelLog.Events)
	assert.Equal(t, filepath.Join(cfg.LogDir, KernelLogFile), o.KernelLogPath)
	assert.FileExists(t, filepath.Join(cfg.LogDir, ConsoleLogFile))
	assert.Greater(t, o.BootTime, time.Duration(0))
}

// kernel612 is the Debian 6.12 kernel (bookworm-security) the 6.12 tests boot.
const kernel612 = "6.12.118+deb12"

// TestRun612SelfPatchingSurvives boots Debian's 6.12 kernel with two vCPUs and makes it
// patch its own code 800 times (the sched_schedstats static key) while the other vCPU forks.
// Under QEMU's multi-threaded TCG this died of "Oops: int3" in 4 of 6 guests; with the
// single-threaded TCG that Run uses, in none of 10.
func TestRun612SelfPatchingSurvives(t *testing.T) {
	cfg := privConfig(t)
	cfg.Kernel, cfg.CPUs, cfg.Timeout = kernel612, 2, 4*time.Minute
	var stdout bytes.Buffer
	cfg.Stdout = &stdout
	o, err := RunOutcome(context.Background(), cfg, []string{"/bin/sh", "-c", `
		( i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done ) &
		i=0
		while [ $i -lt 400 ]; do
			echo 1 >/proc/sys/kernel/sched_schedstats; echo 0 >/proc/sys/kernel/sched_schedstats
			i=$((i+1))
		done
		kill $! 2>/dev/null; echo "flips: $i"`})
	require.NoError(t, err)
	assert.Equal(t, 0, o.ExitCode)
	assert.Equal(t, "flips: 400\n", stdout.String())
	assert.Equal(t, "clean", o.KernelLog.Summary(), "events: %+v", o.KernelLog.Events)
}
