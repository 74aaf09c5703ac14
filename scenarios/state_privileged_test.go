//go:build linux

package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/reports"
)

// failingScenario expects a Service without endpoints to answer, which it cannot: its
// second step fails.
const failingScenario = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: state-on-failure
topology: {nodes: 1, clients: 1}
manifests:
- inline:
    apiVersion: v1
    kind: Service
    metadata: {name: empty}
    spec:
      clusterIP: 10.96.0.50
      type: NodePort
      ports: [{port: 80, targetPort: 80}]
steps:
- wait: {synced: true}
- name: empty-answers
  expect: {from: client-0, to: {service: empty, address: nodePort, node: node-0}, expectation: reachable, timeout: 5s}
`

// TestRunSavesNodeStateOnFailure: a failed step leaves the node's rules and conntrack flows
// in the state directory, named in the failed case, and a passing step leaves nothing.
func TestRunSavesNodeStateOnFailure(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "nft", "conntrack")
	sc, err := ParseScenario("state.yaml", []byte(failingScenario), "")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "state")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	given := &reports.Environment{Hostname: "given-by-the-caller"}
	res, err := Run(ctx, sc, RunOptions{Backends: []string{"nftables"}, StateDir: dir, Environment: given})
	require.Error(t, err, "the expectation must fail")
	assert.Equal(t, "given-by-the-caller", res.Environment.Hostname, "RunOptions.Environment is recorded, not collected again")
	path := filepath.Join(dir, "state-on-failure-nftables-step2.txt")
	var failed *reports.Case
	for i, c := range res.Cases {
		if c.Name == "empty-answers" {
			failed = &res.Cases[i]
		}
	}
	require.NotNil(t, failed, "cases: %+v", res.Cases)
	assert.Equal(t, reports.CaseFail, failed.Result)
	assert.Contains(t, failed.Evidence, "node state at the failure: "+path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	state := string(data)
	assert.Contains(t, state, "### node-0 (nftables): nft list table ip kube-proxy\n")
	assert.Contains(t, state, "10.96.0.50", "the Service's rules are in the dump")
	assert.Contains(t, state, "### node-0 (nftables): conntrack -L\n")
	assert.NotContains(t, state, "(failed:")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only the failed step leaves a state file")
}
