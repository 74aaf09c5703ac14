package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/reports"
)

// writeSyncs saves a run with one declared full-sync cell and one rule count.
func writeSyncs(t *testing.T, dir string, syncs []float64, rules float64) string {
	t.Helper()
	r := &reports.Results{Scenario: "bench"}
	r.Declare(reports.LegacyMetrics()...)
	r.Add("nftables", reports.Measurement{Name: reports.MeasureSync, Params: map[string]string{"services": "1000", "kind": "full"}, Unit: reports.UnitSeconds, Samples: syncs})
	r.Add("nftables", reports.Measurement{Name: reports.MeasureRules, Params: map[string]string{"services": "1000"}, Unit: reports.UnitCount, Samples: []float64{rules}})
	require.NoError(t, r.Write(dir))
	return dir
}

// TestCompareCommand: compare's exit status is the gate CI reads; each way to fail is
// made to fail here.
func TestCompareCommand(t *testing.T) {
	base := t.TempDir()
	// Five samples within ±1%: Mann-Whitney sees a 10% change among them.
	five := []float64{0.300, 0.303, 0.297, 0.300, 0.302}
	old := writeSyncs(t, filepath.Join(base, "old"), five, 4000)
	same := writeSyncs(t, filepath.Join(base, "same"), []float64{0.301, 0.300, 0.299, 0.302, 0.300}, 4000)
	// Spread over ±30%, five samples a side cannot see 10%: no verdict of "no change".
	noisy := writeSyncs(t, filepath.Join(base, "noisy"), []float64{0.22, 0.38, 0.30, 0.26, 0.34}, 4000)
	noisyToo := writeSyncs(t, filepath.Join(base, "noisy2"), []float64{0.35, 0.24, 0.29, 0.39, 0.23}, 4000)
	slow := writeSyncs(t, filepath.Join(base, "slow"), []float64{0.90, 0.93, 0.87, 0.90, 0.96}, 4000)
	moreRules := writeSyncs(t, filepath.Join(base, "rules"), five, 4001)
	one := writeSyncs(t, filepath.Join(base, "one"), []float64{0.3}, 4000)
	oneSlow := writeSyncs(t, filepath.Join(base, "one-slow"), []float64{0.9}, 4000)

	tests := []struct {
		name           string
		args           []string
		want           int
		stdout, stderr string
	}{
		{"same vs same passes", []string{"compare", old, same}, exitOK, "PASS: 2 ~", ""},
		{"same vs same, too noisy to see 10%, cannot be judged", []string{"compare", noisy, noisyToo}, exitFailed, "SEES", "could see a change of"},
		{"3x full sync fails", []string{"compare", old, slow}, exitFailed, "p99/max", "1 metric(s) regressed beyond 10%"},
		{"changed rule count fails", []string{"compare", old, moreRules}, exitFailed, "REGRESSION", "exact figure changed from 4000 to 4001"},
		{"one sample a side cannot be judged", []string{"compare", one, oneSlow}, exitFailed, "CANNOT JUDGE", "pass --allow-unjudged to accept"},
		{"--allow-unjudged accepts it", []string{"compare", one, oneSlow, "--allow-unjudged"}, exitOK, "CANNOT JUDGE", ""},
		{"bad threshold", []string{"compare", old, same, "--threshold", "ten"}, exitBadInput, "", "--threshold"},
		{"bad minimum effect", []string{"compare", old, same, "--min-effect", "lots"}, exitBadInput, "", "--min-effect"},
		{"--strict and --min-effect accepted", []string{"compare", old, same, "--strict", "--min-effect", "30%"}, exitOK, "PASS: 2 ~", ""},
		{"missing file", []string{"compare", old, filepath.Join(base, "nope")}, exitBadInput, "", "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			assert.Equal(t, tt.want, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
			assert.Contains(t, out.String(), tt.stdout)
			assert.Contains(t, errOut.String(), tt.stderr)
		})
	}
}
