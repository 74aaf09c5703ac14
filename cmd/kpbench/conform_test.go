//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
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
