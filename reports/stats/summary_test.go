package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    Summary
	}{
		{"empty", nil, Summary{}},
		{"one", []float64{2}, Summary{N: 1, Min: 2, Max: 2, Mean: 2, P50: 2, P90: 2, P99: 2, CI95Low: 2, CI95High: 2}},
		// 1..10: mean 5.5, sd sqrt(110/12)=3.02765, t(0.975, 9)=2.262157,
		// half-width 2.262157*3.02765/sqrt(10) = 2.16585; p90 = 1+0.9*9 = 9.1.
		{"one to ten, unsorted", []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, Summary{
			N: 10, Min: 1, Max: 10, Mean: 5.5, Stddev: 3.027650, P50: 5.5, P90: 9.1, P99: 9.91,
			CI95Low: 5.5 - 2.165852, CI95High: 5.5 + 2.165852,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.samples...)
			got := Summarize(tt.samples)
			assert.Equal(t, in, append([]float64(nil), tt.samples...), "input must not be modified")
			assert.Equal(t, tt.want.N, got.N)
			for name, pair := range map[string][2]float64{
				"min": {tt.want.Min, got.Min}, "max": {tt.want.Max, got.Max},
				"mean": {tt.want.Mean, got.Mean}, "stddev": {tt.want.Stddev, got.Stddev},
				"p50": {tt.want.P50, got.P50}, "p90": {tt.want.P90, got.P90}, "p99": {tt.want.P99, got.P99},
				"ci95low": {tt.want.CI95Low, got.CI95Low}, "ci95high": {tt.want.CI95High, got.CI95High},
			} {
				assert.InDelta(t, pair[0], pair[1], 1e-5, name)
			}
		})
	}
}

func TestQuantileEmpty(t *testing.T) {
	assert.True(t, math.IsNaN(Quantile(nil, 0.5)))
}

func TestMannWhitneyU(t *testing.T) {
	tests := []struct {
		name    string
		x, y    []float64
		u, p    float64
		wantErr bool
	}{
		// Fully separated, 5 a side: U=0, mean 12.5, var 25*11/12, z=(12.5-0.5)/4.7871=2.5067,
		// p = 2*(1-Phi(2.5067)) = 0.01219 (SciPy: 0.012185).
		{"separated", []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 0, 0.012185, false},
		{"separated, swapped", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, 25, 0.012185, false},
		// Ties: ranks 1, 3,3,3, 5.5,5.5, 7, 8; R_x = 1+3+3+5.5 = 12.5, U = 12.5-10 = 2.5;
		// var = 16/12*(9 - 30/56) = 11.2857; z = (5.5-0.5)/3.35942 = 1.48835; p = 0.13666.
		{"ties", []float64{1, 2, 2, 3}, []float64{2, 3, 4, 5}, 2.5, 0.13666, false},
		{"identical", []float64{3, 3, 3}, []float64{3, 3}, 3, 1, false},
		// Interleaved: U = 0+1+2+3 = 6, mean 8, var 16*9/12 = 12, z = (2-0.5)/3.4641 = 0.43301,
		// p = 2*(1-Phi(0.43301)) = 0.66501.
		{"interleaved", []float64{1, 3, 5, 7}, []float64{2, 4, 6, 8}, 6, 0.66501, false},
		{"empty side", []float64{1}, nil, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, p, err := MannWhitneyU(tt.x, tt.y)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tt.u, u, 1e-9)
			assert.InDelta(t, tt.p, p, 1e-4)
		})
	}
}
