// Package stats holds the statistics kpbench reports with: goodness of fit for backend
// selection, summaries of raw samples, and the significance tests of compare and the
// answers (Mann-Whitney U, the t-test on logs with pooled noise and the change it can
// detect, Fisher's exact test, Holm's correction). (The reports
// package owns the rest; see reports/.)
package stats

import (
	"fmt"

	"gonum.org/v1/gonum/stat/distuv"
)

// ChiSquareGOF is Pearson's chi-square goodness-of-fit test of observed counts against
// expected shares (which need not sum to exactly 1: they are normalised). It returns the
// statistic, the degrees of freedom (categories with a non-zero share, minus one) and the
// p-value: the probability of a fit at least this bad if the counts really follow the
// shares. A small p (say < 0.001) means the selection does not follow the shares.
func ChiSquareGOF(observed []int, shares []float64) (chi2 float64, df int, p float64, err error) {
	if len(observed) != len(shares) || len(observed) < 2 {
		return 0, 0, 0, fmt.Errorf("chi-square: need >= 2 categories with one share each (got %d counts, %d shares)", len(observed), len(shares))
	}
	total, sumShares := 0, 0.0
	for i, o := range observed {
		if o < 0 || shares[i] < 0 {
			return 0, 0, 0, fmt.Errorf("chi-square: negative count or share at %d", i)
		}
		total += o
		sumShares += shares[i]
	}
	if total == 0 || sumShares == 0 {
		return 0, 0, 0, fmt.Errorf("chi-square: no observations")
	}
	for i, o := range observed {
		if shares[i] == 0 {
			if o > 0 {
				return 0, 0, 0, fmt.Errorf("chi-square: %d observations in category %d whose share is 0", o, i)
			}
			continue
		}
		exp := float64(total) * shares[i] / sumShares
		d := float64(o) - exp
		chi2 += d * d / exp
		df++
	}
	df--
	if df < 1 {
		return chi2, df, 1, nil
	}
	p = distuv.ChiSquared{K: float64(df)}.Survival(chi2)
	return chi2, df, p, nil
}

// Uniform returns n equal shares.
func Uniform(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 1 / float64(n)
	}
	return s
}
