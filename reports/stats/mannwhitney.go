package stats

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// MannWhitneyU is the two-sided Mann-Whitney U (Wilcoxon rank-sum) test of whether x and
// y come from the same distribution, the test benchstat uses: it compares ranks, so it is
// robust to the outliers timing samples have. It returns U for x (the number of pairs
// (xi, yj) with xi > yj, ties counting one half) and the two-sided p-value from the normal
// approximation with tie correction and continuity correction (as SciPy's
// mannwhitneyu(method="asymptotic")). When every sample is equal, p is 1.
//
// The approximation is rough below about 8 samples a side; compare refuses to call a
// difference significant with fewer than 4 (see reports.Compare).
func MannWhitneyU(x, y []float64) (u, p float64, err error) {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return 0, 0, fmt.Errorf("mann-whitney: need samples on both sides (got %d and %d)", n1, n2)
	}
	type obs struct {
		v     float64
		fromX bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(a, b obs) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	n := n1 + n2
	rankSumX, tieTerm := 0.0, 0.0
	for i := 0; i < n; {
		j := i
		for j < n && all[j].v == all[i].v {
			j++
		}
		// Positions i..j-1 (ranks i+1..j) share the mid-rank.
		mid := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			if all[k].fromX {
				rankSumX += mid
			}
		}
		if t := float64(j - i); t > 1 {
			tieTerm += t*t*t - t
		}
		i = j
	}
	fn1, fn2, fn := float64(n1), float64(n2), float64(n)
	u = rankSumX - fn1*(fn1+1)/2
	mean := fn1 * fn2 / 2
	variance := fn1 * fn2 / 12 * ((fn + 1) - tieTerm/(fn*(fn-1)))
	if variance <= 0 {
		return u, 1, nil
	}
	d := math.Abs(u-mean) - 0.5
	if d < 0 {
		d = 0
	}
	z := d / math.Sqrt(variance)
	p = 2 * distuv.UnitNormal.Survival(z)
	return u, math.Min(p, 1), nil
}
