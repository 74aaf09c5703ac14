package stats

import (
	"cmp"
	"slices"
)

// Holm returns which of the p-values ps Holm's step-down method rejects at family-wise
// level alpha (R: p.adjust(ps, "holm") < alpha): sorted increasing, the i-th smallest
// (from 0) is rejected while it is below alpha/(len(ps)-i); the first kept stops it.
func Holm(ps []float64, alpha float64) []bool {
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ps[a], ps[b]) })
	rejected := make([]bool, len(ps))
	for rank, i := range order {
		if ps[i] >= alpha/float64(len(ps)-rank) {
			break
		}
		rejected[i] = true
	}
	return rejected
}
