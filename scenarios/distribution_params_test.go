package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseDistParams covers the distribution measurement's scheduler, weights, affinity and
// expected params (scenarios/ipvs-schedulers.yaml uses them).
func TestParseDistParams(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		want    distParams
		wantErr string
	}{
		{"defaults", nil, distParams{expected: "uniform"}, ""},
		{"weights imply expected weights", map[string]string{"scheduler": "wrr", "weights": "1, 2,3"}, distParams{scheduler: "wrr", weights: []int{1, 2, 3}, expected: "weights"}, ""},
		{"sticky affinity", map[string]string{"affinity": "ClientIP", "expected": "sticky"}, distParams{affinity: true, expected: "sticky"}, ""},
		{"zero weight", map[string]string{"weights": "0,1"}, distParams{}, "params.weights"},
		{"bad weight", map[string]string{"weights": "a"}, distParams{}, "params.weights"},
		{"bad affinity", map[string]string{"affinity": "Cookie"}, distParams{}, "params.affinity"},
		{"bad expected", map[string]string{"expected": "zipf"}, distParams{}, "params.expected"},
		{"weights expected without weights", map[string]string{"expected": "weights"}, distParams{}, "needs params.weights"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			param := func(k, def string) string {
				if v, ok := tc.params[k]; ok {
					return v
				}
				return def
			}
			got, err := parseDistParams(param)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
