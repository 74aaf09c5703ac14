package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExitCodesForBadInput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"unknown flag", []string{"lab", "up", "--name", "x", "--bogus"}, exitBadInput, "unknown flag"},
		{"bad int", []string{"lab", "up", "--name", "x", "--nodes", "abc"}, exitBadInput, "--nodes"},
		{"bad output", []string{"lab", "status", "--name", "x", "-o", "yaml"}, exitBadInput, "allowed values are table, json"},
		{"down needs a target", []string{"lab", "down", "--registry", t.TempDir()}, exitBadInput, "exactly one of"},
		{"exec usage", []string{"lab", "exec", "demo"}, exitBadInput, "usage"},
		{"unknown lab", []string{"lab", "status", "--name", "nope", "--registry", t.TempDir()}, exitBadInput, "no such lab"},
		{"stray argument", []string{"version", "extra"}, exitBadInput, "accepts 0 arg"},
		{"version", []string{"version"}, exitOK, ""},
		{"--version", []string{"--version"}, exitOK, ""},
		{"help of a command", []string{"help", "lab", "up"}, exitOK, ""},
		{"help of no command", []string{"help", "nosuch"}, exitBadInput, `unknown help topic "nosuch"`},
		{"help of a misspelt command", []string{"help", "conforn"}, exitBadInput, "did you mean conform?"},
		{"help of no subcommand", []string{"help", "lab", "bogus"}, exitBadInput, `unknown help topic "lab bogus"`},
		{"validate: empty file", []string{"validate", emptyFile(t, "")}, exitBadInput, "empty.yaml:1: empty file"},
		{"validate: only a comment", []string{"validate", emptyFile(t, "# later\n")}, exitBadInput, "empty.yaml:1: empty file"},
		{"validate: only a document marker", []string{"validate", emptyFile(t, "---\n")}, exitBadInput, "empty.yaml:1: empty file"},
		{"run: empty scenario", []string{"run", emptyFile(t, "# later\n")}, exitBadInput, "empty.yaml:1: empty file"},
		{"unknown command", []string{"bogus"}, exitBadInput, `unknown command "bogus" for "kpbench"`},
		{"misspelt command", []string{"conforn"}, exitBadInput, "did you mean conform?"},
		{"unknown subcommand", []string{"lab", "bogus"}, exitBadInput, `unknown command "bogus" for "kpbench lab"`},
		{"group without subcommand prints help", []string{"lab"}, exitOK, ""},
		{"unknown vm subcommand", []string{"vm", "bogus"}, exitBadInput, `unknown command "bogus" for "kpbench vm"`},
		{"run: bad backend", []string{"run", "x.yaml", "--backend", "bogus"}, exitBadInput, "allowed values are all, ours, or"},
		{"validate: bad backend if available", []string{"validate", "../../scenarios/bench.yaml", "--backend", "nftables", "--backend-if-available", "ipvsx"}, exitBadInput, `--backend-if-available "ipvsx"`},
		{"run: missing scenario", []string{"run", "/nonexistent/scenario.yaml"}, exitBadInput, "/nonexistent/scenario.yaml"},
		{"check: seed with placeholders", []string{"check", "../../manifest/testdata/seed-inference-placeholders.yaml"}, exitBadInput, "containerPort: Invalid value: \"xxxx\""},
		{"check: bad backend", []string{"check", "x.yaml", "--backend", "bogus"}, exitBadInput, "allowed values are"},
		{"run: kube-proxy version not built", []string{"run", "x.yaml", "--backend", "iptables,kube-proxy-nftables@v0.0.1"}, exitBadInput, "kube-proxy v0.0.1: "},
		{"run: variant of a backend without any", []string{"run", "x.yaml", "--backend", "nftables@fast"}, exitBadInput, "nftables takes no @variant"},
		{"check: kube-proxy binary missing", []string{"check", "x.yaml", "--backend", "kube-proxy-iptables@/nonexistent/kube-proxy"}, exitBadInput, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			assert.Equal(t, tt.want, code, "stderr: %s", errOut.String())
			assert.Contains(t, errOut.String(), tt.wantErr)
		})
	}
}

// emptyFile writes a scenario file with no document in it (data: nothing, a comment, a
// document marker) and returns its path.
func emptyFile(t *testing.T, data string) string {
	path := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	return path
}

// TestVersionFlag: --version prints what the version command prints.
func TestVersionFlag(t *testing.T) {
	var cmdOut, flagOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"version"}, &cmdOut, io.Discard))
	require.Equal(t, exitOK, run([]string{"--version"}, &flagOut, io.Discard))
	assert.Equal(t, cmdOut.String(), flagOut.String())
	assert.Contains(t, flagOut.String(), "kpbench ")
}
