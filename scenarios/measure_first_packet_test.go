//go:build linux

package scenarios

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/reports"
)

func TestFirstPacketRanks(t *testing.T) {
	assert.Equal(t, []int{0, 250, 500, 749, 999}, ranks(1000, 5))
	assert.Equal(t, []int{0, 1}, ranks(2, 2))
	assert.Equal(t, []int{0, 1, 2}, ranks(3, 3))
}

func TestFirstPacketParams(t *testing.T) {
	ladder := "- churn: {pattern: add, services: 100, allAtOnce: true}"
	for _, tc := range []struct{ name, steps, want string }{
		{"defaults", ladder + "\n- measure: {name: first-packet}", ""},
		{"no generated Services", "- measure: {name: first-packet}", "0 exist at this step"},
		{"fewer Services than ranks", "- churn: {pattern: add, services: 3, allAtOnce: true}\n- measure: {name: first-packet}", "probes 5 ranks"},
		{"one position", ladder + "\n- measure: {name: first-packet, params: {positions: 1}}", "params.positions: Invalid value: 1: must be in range 2-101"},
		{"misspelt samples", ladder + "\n- measure: {name: first-packet, params: {sample: 10}}", `did you mean "samples"?`},
		{"unknown host", ladder + "\n- measure: {name: first-packet, params: {from: client-7}}", "params.from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseScenario("s.yaml", []byte(scenario(tc.steps)), "examples")
			if tc.want != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, FirstPacketParams{Positions: 5, Samples: 100}, *action[*MeasureStep](t, s, 1).Measuring.(*FirstPacketParams))
		})
	}
}

// TestFirstPacketRun measures the curve on a small ladder: one series per rank with
// every sample, and the control.
func TestFirstPacketRun(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "nft")
	sc, err := ParseScenario("fp.yaml", []byte(`apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: first-packet
topology: {nodes: 1, clients: 0}
steps:
- churn: {pattern: add, services: 50, allAtOnce: true}
- wait: {synced: true}
- measure: {name: first-packet, params: {positions: 3, samples: 20}}
`), "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, sc, RunOptions{Backends: []string{"nftables"}})
	require.NoError(t, err)
	var ranksSeen []string
	for _, m := range res.Runs[0].Measurements {
		require.Equal(t, reports.MeasureFirstPacket, m.Name)
		if m.Params["kind"] == "connect" {
			ranksSeen = append(ranksSeen, m.Params["rank"]+"@"+m.Params["index"])
			assert.Len(t, m.Samples, 20)
		}
	}
	slices.Sort(ranksSeen)
	assert.Equal(t, []string{"0%@0", "100%@49", "50%@25"}, ranksSeen)
	require.NotEmpty(t, res.Metrics)
	assert.Equal(t, reports.MeasureFirstPacket, res.Metrics[0].Measurement, "the declaration is recorded with the figures")
}
