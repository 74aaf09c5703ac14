package stats

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFisherGreater checks the one-sided Fisher exact test against hypergeometric sums
// done by hand (R's fisher.test(..., alternative = "greater") gives the same).
func TestFisherGreater(t *testing.T) {
	tests := []struct {
		name       string
		a, n, b, m int
		want       float64
	}{
		{"Fisher's tea: 3 of 4 against 1 of 4 is 17/70", 3, 4, 1, 4, 17.0 / 70},
		{"3 of 3 against 0 of 3 is 1/C(6,3)", 3, 3, 0, 3, 1.0 / 20},
		{"5 of 5 against 0 of 5 is 1/C(10,5)", 5, 5, 0, 5, 1.0 / 252},
		{"2 of 5 against 1 of 5 is (C(5,2)C(5,1)+C(5,3))/C(10,3)", 2, 5, 1, 5, 60.0 / 120},
		{"1 of 10 against 9 of 10 is 1-1/C(20,10)", 1, 10, 9, 10, 1 - 1.0/184756},
		{"none is certain", 0, 10, 4, 10, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, FisherGreater(tt.a, tt.n, tt.b, tt.m), 1e-12)
		})
	}
}

func TestHolm(t *testing.T) {
	tests := []struct {
		name string
		ps   []float64
		want []bool
	}{
		{"one of twenty fair fits at p=0.028 is not rejected", append([]float64{0.028}, slices.Repeat([]float64{0.5}, 19)...), make([]bool, 20)},
		{"a single test is plain alpha", []float64{0.04}, []bool{true}},
		{"step-down stops at the first kept", []float64{0.001, 0.04, 0.03}, []bool{true, false, false}},
		{"step-down rejects in order", []float64{0.01, 0.02, 0.001}, []bool{true, true, true}},
		// R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02.
		{"R's adjusted p-values below 0.05", []float64{0.01, 0.04, 0.03, 0.005}, []bool{true, false, false, true}},
		{"none", nil, []bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Holm(tt.ps, 0.05))
		})
	}
}

// TestLogNoise: the pooled t-test on logs is Student's two-sample t-test of the logs
// (SciPy: ttest_ind([0, 1, 2], [1, 2, 3]) gives t = -1.2247, p = 0.28786, and the
// closed form of the t distribution with 4 df gives the same).
func TestLogNoise(t *testing.T) {
	x, y := []float64{1, 2, 4}, []float64{2, 4, 8}
	var n LogNoise
	n.Add(x)
	n.Add(y)
	n.Add([]float64{5})    // one sample: no deviation to pool
	n.Add([]float64{0, 1}) // not positive: no logs
	assert.Equal(t, 4, n.DF)
	assert.InDelta(t, math.Ln2*math.Ln2, n.Variance(), 1e-12)

	p, diff := n.TTest(x, y)
	assert.InDelta(t, math.Ln2, diff, 1e-12)
	assert.InDelta(t, 0.287864, p, 1e-5)

	// The critical difference (power 1/2): t(0.975, 4) = 2.776445 times the standard
	// error ln2·sqrt(2/3).
	assert.InDelta(t, 2.776445*math.Ln2*math.Sqrt(2.0/3), n.Detectable(3, 3, 0.05, 0.5), 1e-5)
	// More power needs a larger change; more samples a smaller one.
	assert.Greater(t, n.Detectable(3, 3, 0.05, 0.8), n.Detectable(3, 3, 0.05, 0.5))
	assert.Less(t, n.Detectable(30, 30, 0.05, 0.8), n.Detectable(3, 3, 0.05, 0.8))

	var empty LogNoise
	assert.True(t, math.IsInf(empty.Detectable(3, 3, 0.05, 0.8), 1))
	p, _ = empty.TTest(x, y)
	assert.True(t, math.IsNaN(p))
}

func TestMannWhitneyDetectable(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
		want float64
	}{
		// With 3 a side the most extreme ranking gives p = 0.081 (normal approximation):
		// never significant at 0.05.
		{"3 a side cannot be significant", []float64{1, 2, 4}, []float64{1, 2, 4}, math.Inf(1)},
		{"one sample a side", []float64{1}, []float64{2}, math.Inf(1)},
		{"a sample that is not positive", []float64{0, 1, 2, 3}, []float64{1, 2, 3, 4}, math.Inf(1)},
		// Logs 0..3 ln2 a side: deviations from the median 1.5 ln2 are 0.5 and 1.5 ln2,
		// their median ln2, the robust sd 1.4826 ln2; over 6 df, (t(0.975, 6) 2.446912 +
		// t(0.8, 6) 0.905655) × 1.4826 ln2 × sqrt(1/4 + 1/4) × sqrt(π/3).
		{"4 a side", []float64{1, 2, 4, 8}, []float64{1, 2, 4, 8}, (2.446912 + 0.905655) * 1.4826 * math.Ln2 * math.Sqrt(0.5) * math.Sqrt(math.Pi/3)},
		// A stall 100 times the rest does not widen the robust spread of the bulk.
		{"a stall does not hide the bulk", []float64{1, 1.01, 1.02, 1.03, 100}, []float64{1, 1.01, 1.02, 1.03, 1.04},
			(2.306004 + 0.888890) * 1.4826 * math.Log(1.02/1.01) * math.Sqrt(0.4) * math.Sqrt(math.Pi/3)},
		{"no noise: any change", []float64{5, 5, 5, 5}, []float64{5, 5, 5, 5}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MannWhitneyDetectable(tt.x, tt.y, 0.05, 0.8)
			if math.IsInf(tt.want, 1) {
				assert.True(t, math.IsInf(got, 1), "got %g", got)
				return
			}
			assert.InDelta(t, tt.want, got, 1e-4)
		})
	}
}
