//go:build linux

package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDistributionParams covers the distribution measurement's scheduler, weights,
// affinity and expected params (scenarios/ipvs-schedulers.yaml uses them), decoded and
// validated at load.
func TestDistributionParams(t *testing.T) {
	tests := []struct {
		name    string
		params  string
		want    DistributionParams
		wantErr string
	}{
		{"defaults", "{}", DistributionParams{Endpoints: 10, Connections: 1000, Affinity: "None", Expected: "uniform"}, ""},
		{"weights imply expected weights", "{scheduler: wrr, endpoints: 3, weights: '1, 2,3'}",
			DistributionParams{Endpoints: 3, Connections: 300, Scheduler: "wrr", Weights: "1, 2,3", Affinity: "None", Expected: "weights", weights: []int{1, 2, 3}}, ""},
		{"sticky affinity", "{affinity: ClientIP, expected: sticky, connections: 20}",
			DistributionParams{Endpoints: 10, Connections: 20, Affinity: "ClientIP", Expected: "sticky"}, ""},
		{"zero weight", "{endpoints: 2, weights: '0,1'}", DistributionParams{}, "params.weights"},
		{"bad weight", "{endpoints: 2, weights: a}", DistributionParams{}, "params.weights"},
		{"bad affinity", "{affinity: Cookie}", DistributionParams{}, "params.affinity"},
		{"bad expected", "{expected: zipf}", DistributionParams{}, "params.expected"},
		{"bad scheduler", "{scheduler: random}", DistributionParams{}, "params.scheduler"},
		{"weights expected without weights", "{expected: weights}", DistributionParams{}, "params.weights: Required value"},
		{"endpoints as a string", "{endpoints: ten}", DistributionParams{}, "expected an integer"},
		{"unknown param", "{endpoint: 3}", DistributionParams{}, `did you mean "endpoints"?`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseScenario("s.yaml", []byte(scenario("- measure: {name: distribution, params: "+tc.params+"}")), "examples")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, *action[*MeasureStep](t, s, 0).Measuring.(*DistributionParams))
		})
	}
}
