package stats

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// perRule returns the shares of n endpoints when every rule but the last matches with
// probability 1/n (the historical proxy bug): 1/3, 2/9, 4/9 for n = 3.
func perRule(n int) []float64 {
	s, rest := make([]float64, n), 1.0
	for i := range n - 1 {
		s[i] = rest / float64(n)
		rest -= s[i]
	}
	s[n-1] = rest
	return s
}

// TestChiSquarePowerMatchesSimulation: the noncentral approximation agrees with the test
// itself run on simulated counts, at a size where power is low and at the sample size
// it asks for power 0.99.
func TestChiSquarePowerMatchesSimulation(t *testing.T) {
	const alpha, trials = 0.001, 2000
	for _, tt := range []struct {
		endpoints, n int
	}{{3, 60}, {3, 476}, {4, 209}, {5, 134}} {
		shares, alt := Uniform(tt.endpoints), perRule(tt.endpoints)
		want, err := ChiSquarePower(shares, alt, tt.n, alpha)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(uint64(tt.endpoints), uint64(tt.n)))
		detected := 0
		for range trials {
			counts := make([]int, tt.endpoints)
			for range tt.n {
				u, k := rng.Float64(), 0
				for k < tt.endpoints-1 && u >= alt[k] {
					u -= alt[k]
					k++
				}
				counts[k]++
			}
			_, _, p, err := ChiSquareGOF(counts, shares)
			require.NoError(t, err)
			if p < alpha {
				detected++
			}
		}
		got := float64(detected) / trials
		assert.InDelta(t, want, got, 0.03, "%d endpoints, %d observations: power %.3f, simulated %.3f", tt.endpoints, tt.n, want, got)
	}
}

func TestChiSquareSampleSize(t *testing.T) {
	for _, tt := range []struct{ endpoints, want int }{{3, 476}, {4, 209}, {5, 134}, {10, 51}} {
		n, err := ChiSquareSampleSize(Uniform(tt.endpoints), perRule(tt.endpoints), 0.001, 0.99, 100000)
		require.NoError(t, err)
		assert.Equal(t, tt.want, n, "%d endpoints", tt.endpoints)
		below, err := ChiSquarePower(Uniform(tt.endpoints), perRule(tt.endpoints), n-1, 0.001)
		require.NoError(t, err)
		assert.Less(t, below, 0.99, "the fewest: one less falls short")
	}
	_, err := ChiSquareSampleSize(Uniform(2), perRule(2), 0.001, 0.99, 100000)
	assert.ErrorContains(t, err, "equals the shares", "two endpoints: the bug gives 1/2, 1/2")
	_, err = ChiSquareSampleSize(Uniform(3), perRule(3), 0.001, 0.99, 100)
	assert.ErrorContains(t, err, "more than 100")
}
