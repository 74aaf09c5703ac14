package stats

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Summary describes a set of raw samples. Every field is in the unit of the samples
// (seconds, counts, bytes, 1/s) except N. It is derived: the raw samples are always kept
// beside it, and it can be recomputed with Summarize.
type Summary struct {
	// N is the number of samples.
	N int `json:"n"`
	// Min and Max are the smallest and largest sample.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Mean is the arithmetic mean.
	Mean float64 `json:"mean"`
	// Stddev is the sample standard deviation (n-1 in the denominator); 0 when N < 2.
	Stddev float64 `json:"stddev"`
	// P50, P90 and P99 are percentiles, linearly interpolated between the order
	// statistics (the "type 7" estimator of R and NumPy).
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	// CI95Low and CI95High bound the 95% confidence interval of the mean (Student's t
	// with N-1 degrees of freedom). Both equal Mean when N < 2.
	CI95Low  float64 `json:"ci95_low"`
	CI95High float64 `json:"ci95_high"`
}

// Summarize computes the Summary of samples. It does not modify samples. An empty slice
// gives the zero Summary. NaN samples are not filtered: callers must not record them.
func Summarize(samples []float64) Summary {
	n := len(samples)
	if n == 0 {
		return Summary{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	mean := sum / float64(n)
	s := Summary{
		N: n, Min: sorted[0], Max: sorted[n-1], Mean: mean,
		P50: Quantile(sorted, 0.50), P90: Quantile(sorted, 0.90), P99: Quantile(sorted, 0.99),
		CI95Low: mean, CI95High: mean,
	}
	if n < 2 {
		return s
	}
	ss := 0.0
	for _, v := range sorted {
		d := v - mean
		ss += d * d
	}
	s.Stddev = math.Sqrt(ss / float64(n-1))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	half := t * s.Stddev / math.Sqrt(float64(n))
	s.CI95Low, s.CI95High = mean-half, mean+half
	return s
}

// Quantile returns the q-quantile (0 <= q <= 1) of sorted, which must be sorted in
// increasing order, interpolating linearly between order statistics. It returns NaN for
// an empty slice.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	h := q * float64(n-1)
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	if lo < 0 {
		return sorted[0]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}
