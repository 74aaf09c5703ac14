package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// ChiSquarePower is the power of ChiSquareGOF against shares at level alpha when the
// counts really follow alt: the probability that n observations give p < alpha. It uses
// the noncentral chi-square approximation of Pearson's statistic: noncentrality
// λ = n Σ (alt_i - shares_i)² / shares_i, degrees of freedom len(shares)-1. Both share
// lists are normalised.
func ChiSquarePower(shares, alt []float64, n int, alpha float64) (float64, error) {
	lambda, df, err := noncentrality(shares, alt)
	if err != nil {
		return 0, err
	}
	if alpha <= 0 || alpha >= 1 {
		return 0, fmt.Errorf("chi-square power: alpha %g is not in (0, 1)", alpha)
	}
	crit := distuv.ChiSquared{K: float64(df)}.Quantile(1 - alpha)
	return 1 - noncentralChiSquareCDF(crit, float64(df), lambda*float64(n)), nil
}

// ChiSquareSampleSize is the fewest observations with which ChiSquareGOF against shares
// at level alpha detects alt with at least the given power (ChiSquarePower), or an error
// when alt is shares (nothing to detect) or more than maxN would be needed.
func ChiSquareSampleSize(shares, alt []float64, alpha, power float64, maxN int) (int, error) {
	lambda, _, err := noncentrality(shares, alt)
	if err != nil {
		return 0, err
	}
	if lambda < 1e-12 {
		return 0, fmt.Errorf("chi-square sample size: the alternative equals the shares, no sample size detects it")
	}
	at := func(n int) float64 {
		p, _ := ChiSquarePower(shares, alt, n, alpha)
		return p
	}
	if at(maxN) < power {
		return 0, fmt.Errorf("chi-square sample size: more than %d observations needed for power %g", maxN, power)
	}
	lo, hi := 1, maxN // power(hi) >= power; power grows with n
	for lo < hi {
		mid := lo + (hi-lo)/2
		if at(mid) >= power {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// noncentrality returns Σ (alt_i - shares_i)² / shares_i per observation, and the degrees
// of freedom.
func noncentrality(shares, alt []float64) (float64, int, error) {
	if len(shares) != len(alt) || len(shares) < 2 {
		return 0, 0, fmt.Errorf("chi-square power: need >= 2 categories with one share each (got %d and %d)", len(shares), len(alt))
	}
	var sumS, sumA float64
	for i := range shares {
		if shares[i] <= 0 || alt[i] < 0 {
			return 0, 0, fmt.Errorf("chi-square power: share %d must be > 0 (and its alternative >= 0)", i)
		}
		sumS += shares[i]
		sumA += alt[i]
	}
	lambda := 0.0
	for i := range shares {
		s, a := shares[i]/sumS, alt[i]/sumA
		lambda += (a - s) * (a - s) / s
	}
	return lambda, len(shares) - 1, nil
}

// noncentralChiSquareCDF is P(X <= x) for X noncentral chi-square with k degrees of
// freedom and noncentrality lambda: the Poisson(λ/2) mixture of central chi-squares with
// k+2j degrees of freedom.
func noncentralChiSquareCDF(x, k, lambda float64) float64 {
	if lambda == 0 {
		return distuv.ChiSquared{K: k}.CDF(x)
	}
	pois := distuv.Poisson{Lambda: lambda / 2}
	// Sum outward from the Poisson mode until the remaining mass is negligible.
	mode := math.Floor(lambda / 2)
	cdf, mass := 0.0, 0.0
	for j := mode; j >= 0 && mass < 1-1e-12; j-- {
		w := pois.Prob(j)
		mass += w
		cdf += w * distuv.ChiSquared{K: k + 2*j}.CDF(x)
		if w < 1e-16 {
			break
		}
	}
	for j := mode + 1; mass < 1-1e-12; j++ {
		w := pois.Prob(j)
		mass += w
		cdf += w * distuv.ChiSquared{K: k + 2*j}.CDF(x)
		if w < 1e-16 {
			break
		}
	}
	return cdf
}
