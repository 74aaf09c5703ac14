//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends/kubeproxy"
)

// TestCommand: the flags e2e.test runs with, alone or under the ginkgo CLI (upstream's
// flags: --provider=local, the built kubectl, the report directory, no log dump).
func TestCommand(t *testing.T) {
	bins := binaryPaths{e2eTest: "/b/e2e.test", ginkgo: "/b/ginkgo", kubectl: "/b/kubectl"}
	cluster := []string{"--kubeconfig=/k", "--provider=local", "--kubectl-path=/b/kubectl"}
	tests := []struct {
		name     string
		o        Options
		e2eArgs  []string
		dryRun   bool
		wantBin  string
		wantArgs []string
	}{
		{
			name: "alone", o: Options{Parallel: 1, Focus: "F", Skip: "S", Timeout: 1800e9}, e2eArgs: cluster,
			wantBin: "/b/e2e.test",
			wantArgs: []string{`--ginkgo.focus=F`, `--ginkgo.skip=\[Serial\]|\[Disruptive\]|S`, "--ginkgo.timeout=30m0s", "--ginkgo.no-color",
				"--kubeconfig=/k", "--provider=local", "--kubectl-path=/b/kubectl", "--report-dir=/out/nftables", "--disable-log-dump"},
		},
		{
			name: "parallel", o: Options{Parallel: 4, Focus: "F", Timeout: 600e9}, e2eArgs: cluster,
			wantBin: "/b/ginkgo",
			wantArgs: []string{"run", "--procs=4", "--focus=F", `--skip=\[Serial\]|\[Disruptive\]`, "--timeout=10m0s", "--no-color",
				"/b/e2e.test", "--",
				"--kubeconfig=/k", "--provider=local", "--kubectl-path=/b/kubectl", "--report-dir=/out/nftables", "--disable-log-dump"},
		},
		{
			name: "dry run", o: Options{Parallel: 1, Focus: "F", Timeout: 60e9}, dryRun: true,
			wantBin: "/b/e2e.test",
			wantArgs: []string{"--ginkgo.focus=F", `--ginkgo.skip=\[Serial\]|\[Disruptive\]`, "--ginkgo.timeout=1m0s", "--ginkgo.no-color", "--ginkgo.dry-run",
				"--report-dir=/out/nftables", "--disable-log-dump"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, args := command(tt.o, bins, "/out/nftables", tt.e2eArgs, tt.dryRun)
			assert.Equal(t, tt.wantBin, bin)
			assert.Equal(t, tt.wantArgs, args)
		})
	}
}

// TestValidateMakesOutAbsolute: e2e.test runs in another working directory, so a relative
// --out must reach it as the absolute path the user meant.
func TestValidateMakesOutAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	o := Options{Modes: []kubeproxy.Mode{kubeproxy.ModeNFTables}, Out: "out/e2e"}
	o.Default()
	require.NoError(t, o.Validate())
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "out/e2e"), o.Out)
}
