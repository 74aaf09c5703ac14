package yamlpos

import (
	"slices"
	"strings"
)

// maxNameLen bounds the names Closest compares: a longer name is nobody's typo, and the
// distance costs the product of the lengths.
const maxNameLen = 64

// Closest returns the candidate most likely meant by name, or "" when none is close:
// one that differs only by case, else the one at the smallest edit distance
// (case-insensitive Levenshtein) when that distance is at most a third of the longer
// name (at least 1), ties going to the first in sorted order. "repeat" finds "repeats",
// "ruleCount" finds "rules" only if it is that close (it is not: see the tests).
func Closest(name string, candidates []string) string {
	if name == "" || len(name) > maxNameLen {
		return ""
	}
	sorted := slices.Sorted(slices.Values(candidates))
	for _, c := range sorted {
		if strings.EqualFold(c, name) {
			return c
		}
	}
	best, bestDist := "", -1
	lower := strings.ToLower(name)
	for _, c := range sorted {
		if len(c) > maxNameLen {
			continue
		}
		d := editDistance(lower, strings.ToLower(c))
		limit := max(1, max(len(name), len(c))/3)
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
