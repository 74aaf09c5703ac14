//go:build linux

package scenarios

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/cluster/fake"
	"kpbench.dev/kpbench/reports"
)

// fakeOpener opens an in-memory cluster (cluster/fake) for each pass.
type fakeOpener struct{ opened []*fake.Cluster }

func (o *fakeOpener) Name() string { return "fake" }

func (o *fakeOpener) Open(_ context.Context, sc *Scenario, _ string) (cluster.Cluster, func(context.Context) error, error) {
	c := fake.New(sc.Topology.Nodes, *sc.Topology.Clients)
	o.opened = append(o.opened, c)
	return c, func(context.Context) error { return nil }, nil
}

const fakeScenario = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: fake-engine
topology: {nodes: 2, clients: 1}
manifests:
- inline:
    apiVersion: v1
    kind: Pod
    metadata: {name: web-0, labels: {app: web}}
    spec: {nodeName: node-0, containers: [{name: c, image: agnhost, ports: [{containerPort: 8080}]}]}
- inline:
    apiVersion: v1
    kind: Pod
    metadata: {name: web-1, labels: {app: web}}
    spec: {nodeName: node-1, containers: [{name: c, image: agnhost, ports: [{containerPort: 8080}]}]}
- inline:
    apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}
steps:
- wait: {synced: true}
- name: both-answer
  expect: {from: client-0, to: {service: web}, expectation: allEndpoints, count: 20}
- name: served-not-refused
  continueOnFailure: true
  expect: {from: client-0, to: {service: web}, expectation: refused}
- name: drop-web-1
  delete: {kind: Pod, name: web-1}
- wait: {synced: true}
- name: one-answers
  expect: {from: pod:web-0, to: {service: web}, expectation: sameBackend, count: 10}
`

// TestRunOnAFakeCluster runs a scenario end to end through Run on an in-memory cluster,
// without root: the engine opens the cluster through the opener, applies the
// manifests, waits for the proxies, judges every expectation (a wrong one fails), names
// the results after the cluster and records what the cluster says of itself.
func TestRunOnAFakeCluster(t *testing.T) {
	sc, err := ParseScenario("fake.yaml", []byte(fakeScenario), "")
	require.NoError(t, err)
	op := &fakeOpener{}
	res, err := Run(context.Background(), sc, RunOptions{Opener: op})
	require.NoError(t, err, "a failed expectation is a case, not an error")
	got := map[string]string{}
	for _, c := range res.Cases {
		assert.Equal(t, "fake", c.Backend, c.Name)
		got[c.Name] = c.Result
	}
	assert.Equal(t, map[string]string{
		"both-answer":        reports.CasePass,
		"served-not-refused": reports.CaseFail,
		"one-answers":        reports.CasePass,
	}, got)
	require.NotNil(t, res.Environment.Cluster, "the cluster's Info reaches the results")
	assert.Equal(t, "fake", res.Environment.Cluster.ServerVersion)
	assert.Equal(t, 2, res.Environment.Cluster.Nodes)
	require.Len(t, op.opened, 1, "one pass on a cluster kpbench did not build")
	for _, px := range op.opened[0].Proxies() {
		assert.Len(t, px.Records(), 2, "%s synced the manifests, then the deletion", px.Node())
	}
}
