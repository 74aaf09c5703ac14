//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/toolroot"
	"kpbench.dev/kpbench/scenarios"
)

// runToolsCLI runs the root command with args and maps the error to an exit code as run does.
func runToolsCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nsee '%s --help'", err, c.CommandPath())}
	})
	err := root.ExecuteContext(context.Background())
	var ue usageError
	switch {
	case err == nil:
		code = exitOK
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

func TestToolsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no subcommand", []string{"tools"}, "missing subcommand"},
		{"prepare nothing", []string{"tools", "prepare"}, "give the tools to prepare"},
		{"unknown distro", []string{"tools", "prepare", "ubuntu:noble"}, `unknown distribution "ubuntu"`},
		{"bad suite", []string{"tools", "prepare", "host", "debian:../x"}, `suite "../x"`},
		{"no colon", []string{"tools", "prepare", "trixie"}, "DISTRO:SUITE"},
		{"list args", []string{"tools", "list", "x"}, "accepts 0 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runToolsCLI(t, tt.args...)
			assert.Equal(t, exitBadInput, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tt.wantErr)
		})
	}
}

func TestToolsListAndPrepareHost(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/nft"); err != nil {
		testutil.Missing(t, "the host has no nft (make deps installs it)")
	}
	dir := t.TempDir()
	code, stdout, stderr := runToolsCLI(t, "tools", "prepare", "host", "--cache-dir", dir)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^host +/ +- +- +v\d+\.\d+\.\d+ +v1\.8\.\d+ +v1\.8\.\d+`, stdout)
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries, "preparing the host writes nothing")

	// A cached root is listed with the versions its info.json recorded.
	entry := filepath.Join(dir, "debian-trixie")
	require.NoError(t, os.MkdirAll(filepath.Join(entry, "root"), 0o755))
	b, err := json.Marshal(toolroot.Info{Spec: "debian:trixie", Bytes: 110 << 20, Versions: toolroot.Versions{
		{Tool: "nft", Version: "nftables v1.1.3 (Commodore Bullmoose #4)"},
		{Tool: "ipvsadm", Package: "ipvsadm", PackageVersion: "1:1.31-4"},
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(entry, "info.json"), b, 0o644))
	code, stdout, stderr = runToolsCLI(t, "tools", "list", "--cache-dir", dir)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^debian:trixie +`+regexp.QuoteMeta(filepath.Join(entry, "root"))+` +\S+ \S+ +110 MB +v1\.1\.3 +- +- +- +- +1:1\.31-4 \(dpkg\)$`, stdout)
	assert.Regexp(t, `(?m)^host `, stdout)
}

func TestShortVersion(t *testing.T) {
	tests := map[string]string{
		"nftables v1.1.3 (Commodore Bullmoose #4)": "v1.1.3",
		"iptables v1.8.11 (legacy)":                "v1.8.11",
		"ipset v7.22, protocol version: 7":         "v7.22",
		"conntrack v1.4.8 (conntrack-tools)":       "v1.4.8",
		"ipvsadm 1:1.31-4 (dpkg)":                  "1:1.31-4 (dpkg)",
		"":                                         "-",
		"something else":                           "something else",
	}
	for in, want := range tests {
		assert.Equal(t, want, shortVersion(in), in)
	}
}

// TestMatrixScenariosLoad checks that the environment matrix's shipped scenarios load
// (they run for minutes, in the microVM or at 20k Services, so no test runs them).
func TestMatrixScenariosLoad(t *testing.T) {
	for _, f := range []string{"kernel-matrix.yaml", "nft-versions.yaml"} {
		t.Run(f, func(t *testing.T) {
			sc, err := scenarios.Load(filepath.Join("..", "..", "scenarios", f))
			require.NoError(t, err)
			assert.NotEmpty(t, sc.Steps)
		})
	}
}
