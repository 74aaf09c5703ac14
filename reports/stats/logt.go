package stats

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// LogNoise is the variance of the logarithms of samples, pooled over several sample sets
// (each about its own mean) that are taken to share one relative noise: the sizes of
// one figure on one backend, in two runs. Its zero value is an empty pool.
type LogNoise struct {
	// SS is the sum of the squared deviations of the log samples from their set's mean.
	SS float64
	// DF is the pooled degrees of freedom: the samples less one per set.
	DF int
}

// Add pools the log samples of s; a set with fewer than 2 samples or a sample that is
// not positive adds nothing.
func (n *LogNoise) Add(s []float64) {
	if len(s) < 2 || !AllPositive(s) {
		return
	}
	mean := meanLog(s)
	for _, v := range s {
		n.SS += (math.Log(v) - mean) * (math.Log(v) - mean)
	}
	n.DF += len(s) - 1
}

// Variance is the pooled variance of the log samples (NaN for an empty pool).
func (n LogNoise) Variance() float64 {
	if n.DF == 0 {
		return math.NaN()
	}
	return n.SS / float64(n.DF)
}

// TTest is the two-sided t-test of the difference of the mean logs of x and y with the
// pooled variance and its degrees of freedom (x and y need not be in the pool): its
// p-value and the difference of the means (y - x). Samples must be positive; an empty
// pool gives p NaN.
func (n LogNoise) TTest(x, y []float64) (p, diff float64) {
	diff = meanLog(y) - meanLog(x)
	if n.DF == 0 {
		return math.NaN(), diff
	}
	se := math.Sqrt(n.Variance() * (1/float64(len(x)) + 1/float64(len(y))))
	if se == 0 {
		if diff == 0 {
			return 1, 0
		}
		return 0, diff
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n.DF)}
	return 2 * t.Survival(math.Abs(diff)/se), diff
}

// Detectable is the smallest difference of mean logs between nx and ny samples that
// TTest finds significant at alpha with probability power (the normal approximation of
// the non-central t: (t(1-alpha/2) + t(power)) × the standard error). Below it, a test
// that found nothing says nothing. +Inf for an empty pool.
func (n LogNoise) Detectable(nx, ny int, alpha, power float64) float64 {
	if n.DF == 0 || nx == 0 || ny == 0 {
		return math.Inf(1)
	}
	return detectable(n.Variance(), n.DF, nx, ny, alpha, power)
}

// detectable is (t(1-alpha/2) + t(power)) × sqrt(variance × (1/nx + 1/ny)) with df
// degrees of freedom.
func detectable(variance float64, df, nx, ny int, alpha, power float64) float64 {
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}
	return (t.Quantile(1-alpha/2) + t.Quantile(power)) * math.Sqrt(variance*(1/float64(nx)+1/float64(ny)))
}

// MannWhitneyDetectable is the smallest shift of the logs of x and y (a change by a
// factor exp(shift)) that MannWhitneyU finds significant at alpha with probability
// power, from the samples' own noise: the t-test's reach with the spread of the logs,
// times sqrt(π/3), the rank test's efficiency relative to the t-test on normal data.
// The spread is robust, 1.4826 times the median absolute deviation of the logs from
// their side's median (the standard deviation for normal data): the rank test sees the
// bulk of the samples, and a few stalls ten times the median that would inflate a
// standard deviation do not hide a shift of the rest from it. +Inf when the samples
// cannot tell (fewer than 2 a side, a sample that is not positive), or when even the
// most extreme ranking would not be significant at alpha with so few samples.
func MannWhitneyDetectable(x, y []float64, alpha, power float64) float64 {
	if len(x) < 2 || len(y) < 2 || !AllPositive(x) || !AllPositive(y) {
		return math.Inf(1)
	}
	// The most extreme ranking (every y above every x): its p-value from the same
	// approximation MannWhitneyU uses.
	lo, hi := make([]float64, len(x)), make([]float64, len(y))
	for i := range lo {
		lo[i] = float64(i)
	}
	for i := range hi {
		hi[i] = float64(len(x) + i)
	}
	if _, p, err := MannWhitneyU(lo, hi); err != nil || p >= alpha {
		return math.Inf(1)
	}
	var dev []float64
	for _, s := range [][]float64{x, y} {
		logs := make([]float64, len(s))
		for i, v := range s {
			logs[i] = math.Log(v)
		}
		slices.Sort(logs)
		med := Quantile(logs, 0.5)
		for _, l := range logs {
			dev = append(dev, math.Abs(l-med))
		}
	}
	slices.Sort(dev)
	sd := 1.4826 * Quantile(dev, 0.5)
	return detectable(sd*sd, len(x)+len(y)-2, len(x), len(y), alpha, power) * math.Sqrt(math.Pi/3)
}

// AllPositive reports whether every sample of s is above zero (logs exist).
func AllPositive(s []float64) bool {
	return !slices.ContainsFunc(s, func(v float64) bool { return v <= 0 })
}

func meanLog(s []float64) float64 {
	m := 0.0
	for _, v := range s {
		m += math.Log(v)
	}
	return m / float64(len(s))
}
