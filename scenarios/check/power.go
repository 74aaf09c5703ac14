package check

import "kpbench.dev/kpbench/reports/stats"

// DistributionPower is the power with which a path's shares check catches the per-rule
// probability bug (see DistributionProbes).
const DistributionPower = 0.99

// maxDistributionProbes bounds DistributionProbes' search (the bug needs 476 probes at
// 3 endpoints, fewer beyond).
const maxDistributionProbes = 100000

// DistributionProbes returns how many probes a path to endpoints equally weighted
// endpoints sends when their shares are judged: enough for the chi-square test at
// MinPValue to catch, with power DistributionPower, the classic proxy bug of every
// endpoint rule matching with probability 1/n instead of 1/(n-i) (shares 1/3, 2/9, 4/9
// for 3 endpoints); never fewer than minimum. The counts (noncentral chi-square, checked
// against a simulation in reports/stats): 476 probes for 3 endpoints, 209 for 4, 134
// for 5, 99 for 6, 51 for 10. With 2 endpoints the bug changes nothing (1/2, 1/2): minimum.
func DistributionProbes(endpoints, minimum int) int {
	if endpoints < 3 {
		return minimum
	}
	n, err := stats.ChiSquareSampleSize(stats.Uniform(endpoints), perRuleShares(endpoints), MinPValue, DistributionPower, maxDistributionProbes)
	if err != nil {
		return max(minimum, maxDistributionProbes)
	}
	return max(minimum, n)
}

// perRuleShares are the shares of n endpoints when every rule but the last matches with
// probability 1/n: the first gets 1/n, each next one (1-1/n) times the one before, the
// last the rest.
func perRuleShares(n int) []float64 {
	s, rest := make([]float64, n), 1.0
	for i := range n - 1 {
		s[i] = rest / float64(n)
		rest -= s[i]
	}
	s[n-1] = rest
	return s
}
