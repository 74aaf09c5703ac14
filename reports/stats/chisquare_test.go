package stats

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChiSquareGOF(t *testing.T) {
	tests := []struct {
		name     string
		observed []int
		shares   []float64
		chi2     float64
		df       int
		p        float64
		wantErr  bool
	}{
		// A die thrown 60 times, 20 sixes: chi2 = 13.4 with 5 df, p = 0.0199 (suspicious).
		{"die", []int{5, 8, 9, 8, 10, 20}, Uniform(6), 13.4, 5, 0.0199, false},
		{"perfect fit", []int{10, 10}, Uniform(2), 0, 1, 1, false},
		{"weights", []int{30, 10}, []float64{3, 1}, 0, 1, 1, false},
		{"zero share with hits", []int{1, 5}, []float64{0, 1}, 0, 0, 0, true},
		{"one category", []int{4}, []float64{1}, 0, 0, 0, true},
		{"mismatch", []int{1, 2}, []float64{1}, 0, 0, 0, true},
		{"empty", []int{0, 0}, Uniform(2), 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chi2, df, p, err := ChiSquareGOF(tt.observed, tt.shares)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tt.chi2, chi2, 1e-9)
			assert.Equal(t, tt.df, df)
			assert.InDelta(t, tt.p, p, 1e-3)
		})
	}
}

// TestChiSquareFlagsNaiveProbabilities is the distribution measurement's self-test: the
// naive generator that puts every rule at probability 1/n (instead of 1/(n-i)) is flagged,
// kube-proxy's is not.
func TestChiSquareFlagsNaiveProbabilities(t *testing.T) {
	const n, samples = 10, 5000
	pick := func(rng *rand.Rand, prob func(i int) float64) int {
		for i := range n - 1 {
			if rng.Float64() < prob(i) {
				return i
			}
		}
		return n - 1
	}
	run := func(prob func(i int) float64) float64 {
		rng := rand.New(rand.NewPCG(1, 2))
		counts := make([]int, n)
		for range samples {
			counts[pick(rng, prob)]++
		}
		_, _, p, err := ChiSquareGOF(counts, Uniform(n))
		require.NoError(t, err)
		return p
	}
	pNaive := run(func(int) float64 { return 1.0 / n })
	pKubeProxy := run(func(i int) float64 { return 1.0 / float64(n-i) })
	assert.Less(t, pNaive, 1e-6, "every rule at 1/n must be flagged")
	assert.Greater(t, pKubeProxy, 1e-3, "1/(n-i) must pass")
}
