package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kpbench.dev/kpbench/internal/testutil"
)

// fakeToolsCache returns a tools cache holding an (empty) prepared debian:trixie root:
// enough for --tools to resolve it.
func fakeToolsCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "debian-trixie", "root"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "debian-trixie", "info.json"), []byte(`{"spec":"debian:trixie"}`), 0o644))
	return dir
}

// TestToolsFlagBadInput: a bad --tools value, a root that is not prepared and upstream
// kube-proxy under a tool root are bad input (exit 2) on run, check and conform, with the
// hint that prepares the root, before anything is built.
func TestToolsFlagBadInput(t *testing.T) {
	empty := t.TempDir()
	prepared := fakeToolsCache(t)
	scenario := filepath.Join("..", "..", "scenarios", "examples", "nginx-nodeport.scenario.yaml")
	manifest := filepath.Join("..", "..", "scenarios", "examples", "nginx-nodeport.yaml")
	commands := map[string][]string{
		"run":     {"run", scenario, "--out", t.TempDir()},
		"check":   {"check", manifest},
		"conform": {"conform", "--dir", filepath.Join("..", "..", "scenarios", "conformance"), "--out", t.TempDir()},
	}
	tests := []struct {
		name     string
		args     []string
		want     string
		needRoot bool // the check runs after requireRoot
	}{
		{"not a spec", []string{"--tools", "trixie"}, `want "host" or DISTRO:SUITE`, false},
		{"unknown distribution", []string{"--tools", "arch:rolling"}, `unknown distribution "arch"`, false},
		{"not prepared", []string{"--tools", "debian:trixie", "--tools-cache-dir", empty}, "run: kpbench tools prepare debian:trixie", false},
		{"upstream kube-proxy under a root", []string{"--tools", "debian:trixie", "--tools-cache-dir", prepared, "--backend", "kube-proxy-nftables"},
			"cannot take a tool root", true},
	}
	for cmdName, base := range commands {
		for _, tt := range tests {
			t.Run(cmdName+"/"+tt.name, func(t *testing.T) {
				if tt.needRoot {
					testutil.RequireRoot(t) // the backends are checked after the root check
				}
				var out, errOut bytes.Buffer
				code := run(append(append([]string{}, base...), tt.args...), &out, &errOut)
				assert.Equal(t, exitBadInput, code, "stderr: %s", errOut.String())
				assert.Contains(t, errOut.String(), tt.want)
			})
		}
	}
}

// TestToolsFlagResolves: a prepared root resolves to its directory, the host to none.
func TestToolsFlagResolves(t *testing.T) {
	prepared := fakeToolsCache(t)
	tests := []struct {
		value, wantDir, wantSpec string
	}{
		{"host", "", "host"},
		{"", "", "host"},
		{"debian:trixie", filepath.Join(prepared, "debian-trixie", "root"), "debian:trixie"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			f := &toolsFlag{value: tt.value, cacheDir: prepared}
			require.NoError(t, f.resolve())
			assert.Equal(t, tt.wantDir, f.Dir())
			assert.Equal(t, tt.wantSpec, f.Root().Spec.String())
			assert.NoError(t, f.check([]string{"nftables", "iptables"}))
			if tt.wantDir == "" {
				assert.NoError(t, f.check([]string{"kube-proxy-nftables"}), "the host's tools are upstream's own")
			} else {
				assert.Error(t, f.check([]string{"nftables", "kube-proxy-iptables@v1.33.5"}))
			}
		})
	}
}
