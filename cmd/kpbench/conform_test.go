//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
)

// execConform runs `kpbench conform args...` without the root check.
func execConform(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newConformCmd()
	cmd.PreRunE = nil
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestConformBadInput(t *testing.T) {
	suite := filepath.Join("..", "..", "scenarios", "conformance")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown backend", []string{"--dir", suite, "--backend", "bogus"}, "allowed values"},
		{"missing suite", []string{"--dir", filepath.Join(t.TempDir(), "nope")}, "run from the repository root"},
		{"no case matches", []string{"--dir", suite, "--cases", "nothing-*"}, "no case"},
		{"bad glob", []string{"--dir", suite, "--cases", "["}, "pattern"},
		{"stray argument", []string{"--dir", suite, "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := execConform(t, tt.args...)
			require.ErrorContains(t, err, tt.wantErr)
			var ue usageError
			if tt.name != "stray argument" { // cobra's own error; run() maps it through SetFlagErrorFunc
				assert.True(t, errors.As(err, &ue), "bad input must exit 2: %v", err)
			}
		})
	}
}

// TestConformFailingCase runs a one-case suite whose expectation cannot hold: conform must
// print the matrix, write junit.xml and results.json, and report a failure (exit 1).
func TestConformFailingCase(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-restore")
	dir, out := t.TempDir(), t.TempDir()
	sc := `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: no-endpoints-reachable
description: '[sig-network] a deliberately wrong expectation'
topology: {nodes: 1, clients: 1}
manifests:
- inline:
    apiVersion: v1
    kind: Service
    metadata: {name: empty}
    spec:
      selector: {app: none}
      ports: [{port: 80}]
steps:
- wait: {synced: true}
- name: reachable
  expect: {from: node-0, to: {service: empty}, expectation: reachable}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "case.yaml"), []byte(sc), 0o644))
	stdout, err := execConform(t, "--dir", dir, "--backend", "iptables", "--out", out)
	var fe failedError
	require.True(t, errors.As(err, &fe), "want a failed run, got %v", err)
	assert.Contains(t, stdout, "no-endpoints-reachable")
	assert.Contains(t, stdout, "fail")
	junit, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	require.NoError(t, err)
	assert.Contains(t, string(junit), "a deliberately wrong expectation [no-endpoints-reachable]")
	assert.Contains(t, string(junit), "<failure")
	assert.FileExists(t, filepath.Join(out, "results.json"))
}

// pathWithout returns a directory of links to every program of PATH but the named ones,
// and one stub per name in stubs that prints to stderr and exits 1: a machine where those
// tools are missing or broken, for the process's children (os/exec looks programs up in
// PATH when a command is made).
func pathWithout(t *testing.T, missing []string, stubs []string) string {
	t.Helper()
	dir := t.TempDir()
	skip := map[string]bool{}
	for _, n := range append(slices.Clone(missing), stubs...) {
		skip[n] = true
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			link := filepath.Join(dir, e.Name())
			if skip[e.Name()] {
				continue
			}
			if _, err := os.Lstat(link); err == nil {
				continue // the first of PATH wins, as for exec
			}
			require.NoError(t, os.Symlink(filepath.Join(d, e.Name()), link))
		}
	}
	for _, n := range stubs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\necho \"$0: injected failure\" >&2\nexit 1\n"), 0o755))
	}
	return dir
}

// TestConformBackendCannotProgram: a backend whose restore binary is missing, or fails,
// cannot run here; conform must then exit 1 (its cases skipped, with the reason), not 0,
// unless --allow-skip, which exits 0 and still prints the skips.
func TestConformBackendCannotProgram(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-nft-restore")
	suite := filepath.Join("..", "..", "scenarios", "conformance")
	restore := []string{"iptables-nft-restore", "iptables-restore"}
	tests := []struct {
		name           string
		missing, stubs []string
		allowSkip      bool
		wantFail       bool
		wantReason     string
	}{
		{"restore binary missing", restore, nil, false, true, "iptables-nft-restore"},
		{"restore binary fails", nil, restore, false, true, "injected failure"},
		{"--allow-skip accepts it", restore, nil, true, false, "iptables-nft-restore"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", pathWithout(t, tt.missing, tt.stubs))
			args := []string{"--dir", suite, "--backend", "iptables", "--cases", "hairpin", "--out", t.TempDir(), "--wait-timeout", "10s"}
			if tt.allowSkip {
				args = append(args, "--allow-skip")
			}
			stdout, err := execConform(t, args...)
			assert.Contains(t, stdout, "hairpin on iptables: skip: cannot run here")
			assert.Contains(t, stdout, tt.wantReason)
			if !tt.wantFail {
				require.NoError(t, err)
				return
			}
			var fe failedError
			require.True(t, errors.As(err, &fe), "a backend that cannot program must fail conform, got %v\n%s", err, stdout)
			assert.Contains(t, err.Error(), "1 case × backend not checked")
			assert.Contains(t, err.Error(), "--allow-skip")
		})
	}
}
