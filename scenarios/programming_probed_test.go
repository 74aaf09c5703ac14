//go:build linux

package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/reports"
)

// TestProgrammingLatencyProbed runs probed programming latency in a lab: a scenario
// without any change of its own validates (the measurement makes its changes), and every
// node gets one sample per change, each positive and within the timeout.
func TestProgrammingLatencyProbed(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "nft")
	const src = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: probed
topology: {nodes: 2, clients: 0}
steps:
- wait: {synced: true}
- measure: {name: programming-latency, params: {mode: probed, samples: 4, timeout: 20s}}
`
	sc, err := ParseScenario("probed.yaml", []byte(src), "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, sc, RunOptions{Backends: []string{"nftables"}})
	require.NoError(t, err)
	nodes := map[string]bool{}
	for _, m := range res.Runs[0].Measurements {
		if m.Name != reports.MeasureProgrammingLatency {
			continue
		}
		assert.Equal(t, HalfAPIToProbe, m.Params["half"])
		nodes[m.Params["node"]] = true
		require.Len(t, m.Samples, 4, "one sample per change on %s", m.Params["node"])
		for _, v := range m.Samples {
			assert.Greater(t, v, 0.0)
			assert.Less(t, v, 20.0)
		}
	}
	assert.Equal(t, map[string]bool{"node-0": true, "node-1": true}, nodes)
}
