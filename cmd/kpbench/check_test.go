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
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/check"
)

// execCheck runs `kpbench check args...` without the root check.
func execCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCheckCmd()
	cmd.PreRunE = nil
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	return out.String(), cmd.ExecuteContext(context.Background())
}

// TestCheckBadInput: every rejection branch of check exits 2 (usageError) with a message
// naming what is wrong, before any lab exists (these run unprivileged).
func TestCheckBadInput(t *testing.T) {
	good := filepath.Join("..", "..", "scenarios", "examples", "nginx-nodeport.yaml")
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	require.NoError(t, os.WriteFile(broken, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 0}]}\n"), 0o644))
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no file", nil, "at least one manifest"},
		{"unknown backend", []string{good, "--backend", "bogus"}, "--backend"},
		{"bad output", []string{good, "-o", "yaml"}, "allowed values are table, json"},
		{"no node", []string{good, "--nodes", "0"}, "--nodes 0"},
		{"no client", []string{good, "--clients", "0"}, "--clients 0"},
		{"missing file", []string{filepath.Join(t.TempDir(), "nope.yaml")}, "nope.yaml"},
		{"invalid manifest", []string{broken}, "broken.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := execCheck(t, tt.args...)
			require.ErrorContains(t, err, tt.wantErr)
			var ue usageError
			assert.True(t, errors.As(err, &ue), "bad input must exit 2: %v", err)
		})
	}
}

// TestCheckVerdict: check's exit status. A failed path fails; a skipped path (SCTP) or
// nothing checked fails unless --allow-skip; passes and headless Services (info) pass.
func TestCheckVerdict(t *testing.T) {
	pass := check.Outcome{Service: "default/a", Port: "80", Path: "clusterIP", Verdict: check.Pass}
	info := check.Outcome{Service: "default/h", Path: "-", Verdict: check.Info}
	skip := check.Outcome{Service: "default/s", Port: "sctp/80", Path: "clusterIP", Verdict: check.Skip}
	fail := check.Outcome{Service: "default/a", Port: "80", Path: "nodePort", Verdict: check.Fail}
	tests := []struct {
		name      string
		outs      []check.Outcome
		allowSkip bool
		wantErr   string
	}{
		{"all pass", []check.Outcome{pass, info}, false, ""},
		{"a failed path", []check.Outcome{pass, fail}, false, "some paths do not work"},
		{"a failed path with --allow-skip", []check.Outcome{fail}, true, "some paths do not work"},
		{"a skipped path", []check.Outcome{pass, skip}, false, "1 paths not checked (default/s sctp/80 clusterIP"},
		{"a skipped path with --allow-skip", []check.Outcome{pass, skip}, true, ""},
		{"nothing checked", nil, false, "nothing was checked"},
		{"nothing checked with --allow-skip", nil, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkVerdict(tt.outs, tt.allowSkip)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			var fe failedError
			assert.True(t, errors.As(err, &fe), "exit 1: %v", err)
		})
	}
}

// TestUnknownFlagExits2: an unknown flag of any command exits 2 naming it (a typo in a
// CI script must fail, not run something else).
func TestUnknownFlagExits2(t *testing.T) {
	for _, tt := range []struct {
		args []string
		flag string
	}{
		{[]string{"conform", "--alow-skip"}, "--alow-skip"},
		{[]string{"check", "x.yaml", "--bakend", "nftables"}, "--bakend"},
		{[]string{"run", "x.yaml", "--allow-skipp"}, "--allow-skipp"},
		{[]string{"--bogus"}, "--bogus"},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			assert.Equal(t, exitBadInput, code, "%v: %s", tt.args, stderr.String())
			assert.Contains(t, stderr.String(), "unknown flag: "+tt.flag)
		})
	}
}

// TestRunVerdict: run's exit status: a failed case fails; a skipped one fails unless
// --allow-skip.
func TestRunVerdict(t *testing.T) {
	c := func(r string) reports.Case {
		return reports.Case{Name: "x", Backend: "ipvs", Result: r, Reason: "no IPVS"}
	}
	tests := []struct {
		name      string
		cases     []reports.Case
		allowSkip bool
		wantErr   string
	}{
		{"pass", []reports.Case{c(reports.CasePass)}, false, ""},
		{"fail", []reports.Case{c(reports.CasePass), c(reports.CaseFail)}, true, "some expectations failed"},
		{"skip", []reports.Case{c(reports.CasePass), c(reports.CaseSkip)}, false, "1 cases not checked (x on ipvs: no IPVS"},
		{"skip allowed", []reports.Case{c(reports.CaseSkip)}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runVerdict(&reports.Results{Cases: tt.cases}, tt.allowSkip)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			var fe failedError
			assert.True(t, errors.As(err, &fe))
		})
	}
}

// TestRunBadInput: run's own rejection branches exit 2 before anything is built (the
// scenario refusals are TestRunRefusesBeforeTheLab's).
func TestRunBadInput(t *testing.T) {
	testutil.RequireRoot(t) // run checks root before its arguments
	good := filepath.Join("..", "..", "scenarios", "examples", "nginx-nodeport.scenario.yaml")
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"no scenario", "accepts 1 arg", []string{"run"}},
		{"two scenarios", "accepts 1 arg", []string{"run", good, good}},
		{"unknown backend", `--backend "bogus"`, []string{"run", good, "--backend", "bogus"}},
		{"missing scenario", "nope.yaml", []string{"run", filepath.Join(t.TempDir(), "nope.yaml")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, exitBadInput, run(tt.args, &stdout, &stderr), stderr.String())
			assert.Contains(t, stderr.String(), tt.want)
			assert.NotContains(t, stderr.String(), "building lab")
		})
	}
}
