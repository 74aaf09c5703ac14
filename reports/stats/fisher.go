package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/combin"
)

// FisherGreater is the one-sided p-value of Fisher's exact test that the rate a/n exceeds
// b/m (R: fisher.test(matrix(c(a, n-a, b, m-b), 2), alternative = "greater"); SciPy:
// fisher_exact([[a, n-a], [b, m-b]], alternative="greater")): the hypergeometric
// probability that a or more of the a+b successes fall among the n.
func FisherGreater(a, n, b, m int) float64 {
	k, total := a+b, n+m
	lchoose := func(n, k int) float64 { return combin.LogGeneralizedBinomial(float64(n), float64(k)) }
	p := 0.0
	for i := a; i <= min(k, n); i++ {
		if k-i > m {
			continue
		}
		p += math.Exp(lchoose(n, i) + lchoose(m, k-i) - lchoose(total, k))
	}
	return min(p, 1)
}
