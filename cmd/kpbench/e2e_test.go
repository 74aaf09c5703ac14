//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/internal/upstream"
)

// TestE2EBadInput: every refusal exits 2, names the flag, and comes before anything is
// built or written (no e2e.test build, no cluster, no output directory).
func TestE2EBadInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	notExec := filepath.Join(dir, "kube-proxy")
	require.NoError(t, os.WriteFile(notExec, []byte("x"), 0o644))
	base := []string{"e2e", "--dir", dir, "--registry", dir}
	// Should a refusal go missing, the run fails fast on a missing e2e.test, with no
	// checkout to build it from, instead of building it.
	t.Setenv(upstream.DirEnv, dir)
	t.Chdir(dir)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no out", []string{"--proxy", "nftables"}, `required flag(s) "out" not set`},
		{"no proxy", []string{"--out", out}, "--proxy: required"},
		{"unknown proxy", []string{"--proxy", "userspace", "--out", out}, `--proxy "userspace": allowed values are iptables, nftables, ipvs`},
		{"a mode twice", []string{"--proxy", "nftables,iptables,nftables", "--out", out}, "--proxy: nftables given twice"},
		{"no nodes", []string{"--proxy", "nftables", "--nodes", "0", "--out", out}, "--nodes 0: allowed values are 1-16"},
		{"too many nodes", []string{"--proxy", "nftables", "--nodes", "17", "--out", out}, "--nodes 17: allowed values are 1-16"},
		{"bad focus", []string{"--proxy", "nftables", "--focus", "(", "--out", out}, `--focus "(": error parsing regexp`},
		{"bad skip", []string{"--proxy", "nftables", "--skip", "[", "--out", out}, `--skip "[": error parsing regexp`},
		{"kube-proxy absent", []string{"--proxy", "nftables", "--kube-proxy", filepath.Join(dir, "nope"), "--out", out}, "--kube-proxy " + filepath.Join(dir, "nope")},
		{"kube-proxy not executable", []string{"--proxy", "nftables", "--kube-proxy", notExec, "--out", out}, "not an executable file"},
		{"background services", []string{"--proxy", "nftables", "--background-services", "-1", "--out", out}, "--background-services -1: allowed values are 0-20000"},
		{"no parallel", []string{"--proxy", "nftables", "--parallel", "0", "--out", out}, "--parallel 0: allowed values are 1-25"},
		{"too parallel", []string{"--proxy", "nftables", "--parallel", "26", "--out", out}, "--parallel 26: allowed values are 1-25"},
		{"timeout", []string{"--proxy", "nftables", "--timeout", "0s", "--out", out}, "--timeout 0s: must be positive"},
		{"bad name", []string{"--proxy", "nftables", "--name", "Bad", "--out", out}, "--name Bad"},
		{"out is a file", []string{"--proxy", "nftables", "--out", notExec}, "--out " + notExec + ": not a directory"},
		{"e2e.test not executable", []string{"--dry-run", "--e2e-test", notExec, "--out", out}, "--e2e-test " + notExec},
	}
	if ipvs.Probe("/proc/self/ns/net") != nil {
		tests = append(tests, struct {
			name    string
			args    []string
			wantErr string
		}{"ipvs where the kernel has none", []string{"--proxy", "ipvs", "--out", out}, "--proxy ipvs: kernel has no IPVS"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append(append([]string{}, base...), tt.args...), &stdout, &stderr)
			assert.Equal(t, exitBadInput, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tt.wantErr)
			assert.NotContains(t, stdout.String(), "building")
		})
	}
	_, err := os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist, "bad input writes nothing")
}
