//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab/vm"
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
	if os.Getenv(vm.EnvInVM) == "1" {
		t.Skip("already inside the VM")
	}
	code, stdout, stderr := runVMCLI(t, "vm", "exec", "--mem", "1G", "--cpus", "1", "--timeout", "3m", "--",
		"/bin/sh", "-c", "echo in-vm $KPBENCH_IN_VM; exit 3")
	assert.Equal(t, 3, code, "stderr: %s", stderr)
	assert.Equal(t, "in-vm 1\n", stdout)
}
