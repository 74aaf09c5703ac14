package reports

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// around returns n samples around v with relative noise rel (seeded, deterministic).
func around(seed uint64, n int, v, rel float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := make([]float64, n)
	for i := range s {
		s[i] = v * (1 + rel*(2*rng.Float64()-1))
	}
	return s
}

// oneMetric is a run with a single measurement on backend iptables.
func oneMetric(name, unit string, samples []float64) *Results {
	r := &Results{SchemaVersion: SchemaVersion}
	r.Add("iptables", Measurement{Name: name, Params: map[string]string{"services": "20000", "kind": "full"}, Unit: unit, Samples: samples})
	return r
}

func TestCompare(t *testing.T) {
	const metric = "sync/backend=iptables/services=20000/kind=full"
	tests := []struct {
		name         string
		old, new     *Results
		allowMissing bool
		want         Verdict
		wantErr      string
	}{
		{"20% slowdown, tight samples: fails",
			oneMetric(MeasureSync, UnitSeconds, around(1, 10, 5.9, 0.02)),
			oneMetric(MeasureSync, UnitSeconds, around(2, 10, 5.9*1.2, 0.02)),
			false, VerdictRegression, "1 metric(s) regressed beyond 10%: " + metric + " (+"},
		{"noise within the threshold: passes",
			oneMetric(MeasureSync, UnitSeconds, around(1, 10, 5.9, 0.05)),
			oneMetric(MeasureSync, UnitSeconds, around(3, 10, 5.9, 0.05)),
			false, VerdictSame, ""},
		{"significant 5% slowdown under a 10% threshold: worse, passes",
			oneMetric(MeasureSync, UnitSeconds, around(1, 10, 5.9, 0.01)),
			oneMetric(MeasureSync, UnitSeconds, around(2, 10, 5.9*1.05, 0.01)),
			false, VerdictWorse, ""},
		{"20% improvement: passes",
			oneMetric(MeasureSync, UnitSeconds, around(1, 10, 5.9, 0.02)),
			oneMetric(MeasureSync, UnitSeconds, around(2, 10, 5.9*0.8, 0.02)),
			false, VerdictBetter, ""},
		{"50% slowdown with 3 samples: cannot be significant",
			oneMetric(MeasureSync, UnitSeconds, around(1, 3, 5.9, 0.01)),
			oneMetric(MeasureSync, UnitSeconds, around(2, 3, 5.9*1.5, 0.01)),
			false, VerdictSame, ""},
		{"throughput 20% lower: fails",
			oneMetric(MeasureThroughput, UnitPerSecond, around(1, 8, 13900, 0.02)),
			oneMetric(MeasureThroughput, UnitPerSecond, around(2, 8, 13900*0.8, 0.02)),
			false, VerdictRegression, "regressed"},
		{"throughput 20% higher: passes",
			oneMetric(MeasureThroughput, UnitPerSecond, around(1, 8, 13900, 0.02)),
			oneMetric(MeasureThroughput, UnitPerSecond, around(2, 8, 13900*1.2, 0.02)),
			false, VerdictBetter, ""},
		{"more rules: reported, never fails",
			oneMetric(MeasureRules, UnitCount, around(1, 6, 1000, 0.01)),
			oneMetric(MeasureRules, UnitCount, around(2, 6, 2000, 0.01)),
			false, VerdictChanged, ""},
		{"missing in NEW: fails",
			oneMetric(MeasureSync, UnitSeconds, around(1, 10, 5.9, 0.02)),
			&Results{SchemaVersion: SchemaVersion},
			false, VerdictMissing, "1 metric(s) of OLD missing from NEW (pass --allow-missing to accept): " + metric},
		{"missing in NEW, allowed: passes",
			oneMetric(MeasureSync, UnitSeconds, around(1, 10, 5.9, 0.02)),
			&Results{SchemaVersion: SchemaVersion},
			true, VerdictMissing, ""},
		{"only in NEW: reported as new, passes",
			&Results{SchemaVersion: SchemaVersion},
			oneMetric(MeasureSync, UnitSeconds, around(1, 10, 5.9, 0.02)),
			false, VerdictNew, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.old, tt.new, CompareOptions{Threshold: 0.10, AllowMissing: tt.allowMissing})
			require.Len(t, c.Deltas, 1)
			d := c.Deltas[0]
			assert.Equal(t, tt.want, d.Verdict, "change %+.3f p %.3g", d.Change, d.P)
			err := c.Err()
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.wantErr)
			}
			var out bytes.Buffer
			require.NoError(t, c.Write(&out))
			assert.Contains(t, out.String(), d.Metric)
			assert.Contains(t, out.String(), string(tt.want))
			if err != nil {
				assert.Contains(t, out.String(), "\nFAIL: ")
			} else {
				assert.Contains(t, out.String(), "\nPASS: ")
			}
		})
	}
}

func TestCompareFixtureWithItself(t *testing.T) {
	r := sampleResults()
	c := Compare(r, sampleResults(), CompareOptions{Threshold: 0.10})
	require.NoError(t, c.Err())
	for _, d := range c.Deltas {
		assert.Equal(t, VerdictSame, d.Verdict, d.Metric)
	}
	// Distributions are not compared: 3 backends x 4 sizes x 8 metrics, + programming
	// latency x 3, + per-rule x 2.
	assert.Len(t, c.Deltas, 3*4*8+3+2)
}

func TestParseThreshold(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"10%", 0.10, false},
		{"2.5%", 0.025, false},
		{" 10 ", 0.10, false},
		{"0%", 0, false},
		{"ten", 0, true},
		{"-5%", 0, true},
		{"%", 0, true},
		{"1e9%", 0, true},
		{"NaN%", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseThreshold(tt.in)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tt.want, got, 1e-12)
		})
	}
	assert.Equal(t, "10%", FormatThreshold(0.10))
}

func TestCompareNotesDifferentRunLabels(t *testing.T) {
	samples := around(1, 10, 1, 0.01)
	plain := oneMetric(MeasureSync, UnitSeconds, samples)
	hinted := oneMetric(MeasureSync, UnitSeconds, samples)
	hinted.Label("iptables", "iptables-cache", "whole-table")

	c := Compare(plain, hinted, CompareOptions{Threshold: 0.1})
	require.Len(t, c.Notes, 1)
	assert.Equal(t, "iptables ran with different labels: old {}, new {iptables-cache=whole-table}", c.Notes[0])
	require.NoError(t, c.Err(), "a note does not fail the gate")
	var out strings.Builder
	require.NoError(t, c.Write(&out))
	assert.Contains(t, out.String(), "note: iptables ran with different labels")

	assert.Empty(t, Compare(hinted, hinted, CompareOptions{Threshold: 0.1}).Notes)
}
