//go:build linux

package vm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
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
			code, err := Run(ctx, c, tc.argv)
			t.Logf("boot+run: %s", time.Since(start).Round(time.Millisecond))
			require.NoError(t, err)
			assert.Equal(t, tc.wantCode, code, "stderr: %s", stderr.String())
			assert.Equal(t, tc.wantOut, stdout.String())
			assert.Contains(t, stderr.String(), tc.wantErr)
		})
	}
	b, err := os.ReadFile(filepath.Join(out, "r.txt"))
	require.NoError(t, err, "a file written in the writable directory must reach the host")
	assert.Equal(t, "result\n", string(b))
}

// TestRunTimeout checks that a hung guest is killed and reported with the console tail.
func TestRunTimeout(t *testing.T) {
	cfg := privConfig(t)
	cfg.Timeout = 12 * time.Second
	var stdout bytes.Buffer
	cfg.Stdout = &stdout
	start := time.Now()
	_, err := Run(context.Background(), cfg, []string{"/bin/sh", "-c", "echo started; exec sleep 1000"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timeout")
	assert.Less(t, time.Since(start), cfg.Timeout+15*time.Second)
	assert.True(t, strings.HasPrefix(stdout.String(), "started"), "output before the hang is streamed: %q", stdout.String())
}
