package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/reports"
)

// writeRun saves a small results directory with one backend.
func writeRun(t *testing.T, dir, scenario, accel, kernel string) {
	t.Helper()
	r := &reports.Results{Scenario: scenario, Environment: reports.Environment{Kernel: "Linux", KernelRelease: kernel, Accelerator: accel}}
	r.Add("nftables", reports.Measurement{Name: reports.MeasureSync, Params: map[string]string{"services": "1000", "kind": "full"}, Unit: reports.UnitSeconds, Samples: []float64{0.2, 0.3, 0.25}})
	r.Add("ipvs", reports.Measurement{Name: reports.MeasureSync, Params: map[string]string{"services": "1000", "kind": "full"}, Unit: reports.UnitSeconds, Samples: []float64{0.1, 0.1, 0.1}})
	require.NoError(t, r.Write(dir))
}

func TestReportCommand(t *testing.T) {
	base := t.TempDir()
	native, vm := filepath.Join(base, "native"), filepath.Join(base, "vm")
	writeRun(t, native, "bench", "native", "6.18.44")
	writeRun(t, vm, "vm-ladder", "tcg", "6.1.0-57-amd64")
	matrix := filepath.Join(base, "matrix")
	writeRun(t, filepath.Join(matrix, "6.1.0-57"), "vm-ladder", "tcg", "6.1.0-57-amd64")
	writeRun(t, filepath.Join(matrix, "6.12.118+deb12"), "vm-ladder", "tcg", "6.12.118+deb12-amd64")
	merged := filepath.Join(base, "merged")

	tests := []struct {
		name    string
		args    []string
		want    int
		stdout  string
		stderr  string
		written []string
	}{
		{"one run, as before", []string{"report", native}, exitOK, "2.5x faster than nftables (250 ms)", "",
			[]string{filepath.Join(native, reports.HTMLFile), filepath.Join(native, reports.BenchFile), filepath.Join(native, "plots", "sync-full.png")}},
		{"several runs merged", []string{"report", native, vm, "--out", merged}, exitOK, filepath.Join(merged, reports.HTMLFile), "",
			[]string{filepath.Join(merged, reports.HTMLFile), filepath.Join(merged, "plots", "tcg-6.1.0-57-amd64-vm-ladder-sync-full.png")}},
		{"a kernel matrix into itself", []string{"report", matrix, "-q"}, exitOK, filepath.Join(matrix, reports.HTMLFile), "", []string{filepath.Join(matrix, reports.HTMLFile)}},
		{"several need --out", []string{"report", native, vm}, exitBadInput, "", "name its directory with --out", nil},
		{"no results", []string{"report", t.TempDir()}, exitBadInput, "", "no results.json", nil},
		{"no argument", []string{"report"}, exitBadInput, "", "requires at least 1 arg", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			assert.Equal(t, tt.want, code, "stderr: %s", errOut.String())
			assert.Contains(t, out.String(), tt.stdout)
			assert.Contains(t, errOut.String(), tt.stderr)
			for _, f := range tt.written {
				fi, err := os.Stat(f)
				if assert.NoError(t, err) {
					assert.NotZero(t, fi.Size(), f)
				}
			}
		})
	}
	_, err := os.Stat(filepath.Join(vm, reports.HTMLFile))
	assert.True(t, os.IsNotExist(err), "merging leaves the runs' own directories alone")
}
