//go:build linux

package check

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/reports/stats"
)

func TestDistributionProbes(t *testing.T) {
	for _, tt := range []struct{ endpoints, minimum, want int }{
		{2, 40, 40}, {3, 60, 476}, {4, 80, 209}, {5, 100, 134}, {6, 120, 120}, {10, 200, 200}, {3, 1000, 1000},
	} {
		got := DistributionProbes(tt.endpoints, tt.minimum)
		assert.Equal(t, tt.want, got, "%d endpoints, minimum %d", tt.endpoints, tt.minimum)
		if tt.endpoints >= 3 {
			p, err := stats.ChiSquarePower(stats.Uniform(tt.endpoints), perRuleShares(tt.endpoints), got, MinPValue)
			assert.NoError(t, err)
			assert.GreaterOrEqual(t, p, DistributionPower)
		}
	}
	assert.InDeltaSlice(t, []float64{1.0 / 3, 2.0 / 9, 4.0 / 9}, perRuleShares(3), 1e-12)
}
