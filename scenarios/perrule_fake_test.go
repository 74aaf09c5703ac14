//go:build linux

package scenarios

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/backends/perrule"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/cluster/fake"
	"kpbench.dev/kpbench/reports"
)

// splitSyncBackend is a per-rule backend whose proxy programs each change in three syncs,
// as the lab's agent can: the Service's rules, then its endpoints' rules, then a sync
// that adds nothing. Its timings are kept per sync, as perrule.Backend keeps them.
type splitSyncBackend struct {
	mu    sync.Mutex
	bulk  bool
	syncs [][]perrule.RuleTiming // rules added by each sync, in order
	rules int                    // rules in the table
}

func (b *splitSyncBackend) Name() string { return "iptables-perrule" }
func (b *splitSyncBackend) Sync(context.Context, *backends.State) (backends.SyncResult, error) {
	return backends.SyncResult{}, nil
}
func (b *splitSyncBackend) Cleanup(context.Context) error { return nil }
func (b *splitSyncBackend) SetBulk(on bool)               { b.mu.Lock(); b.bulk = on; b.mu.Unlock() }

func (b *splitSyncBackend) RuleTimings() []perrule.RuleTiming {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.syncs) == 0 {
		return nil
	}
	return b.syncs[len(b.syncs)-1]
}

func (b *splitSyncBackend) Syncs() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return uint64(len(b.syncs))
}

func (b *splitSyncBackend) RuleTimingsSince(mark uint64) ([]perrule.RuleTiming, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []perrule.RuleTiming
	for _, ts := range b.syncs[mark:] {
		out = append(out, ts...)
	}
	return out, true
}

// sync records one sync adding n rules (none in bulk mode, as the real backend).
func (b *splitSyncBackend) sync(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ts []perrule.RuleTiming
	for range n {
		if !b.bulk {
			ts = append(ts, perrule.RuleTiming{Table: "nat", TableRules: b.rules, Duration: time.Millisecond, Sync: uint64(len(b.syncs) + 1)})
		}
		b.rules++
	}
	b.syncs = append(b.syncs, ts)
}

// splitSyncProxy is the node's proxy: a record per sync of its backend.
type splitSyncProxy struct {
	be   *splitSyncBackend
	mu   sync.Mutex
	recs []agent.SyncRecord
	rv   uint64
}

func (p *splitSyncProxy) Node() string { return "node-0" }
func (p *splitSyncProxy) ForceSync(context.Context, bool) (agent.SyncRecord, error) {
	p.be.sync(0)
	return p.record(true), nil
}
func (p *splitSyncProxy) Records() []agent.SyncRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]agent.SyncRecord(nil), p.recs...)
}
func (p *splitSyncProxy) Metrics() agent.Metrics    { return agent.Metrics{} }
func (p *splitSyncProxy) Backend() backends.Backend { return p.be }

func (p *splitSyncProxy) record(full bool) agent.SyncRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	t0 := time.Unix(1000, 0)
	r := agent.SyncRecord{Start: t0, End: t0.Add(10 * time.Millisecond), ResourceVersion: p.rv, Result: backends.SyncResult{Full: full}}
	p.recs = append(p.recs, r)
	return r
}

// splitSyncCluster is the fake cluster with that proxy on its one node.
type splitSyncCluster struct {
	*fake.Cluster
	px *splitSyncProxy
}

func (c *splitSyncCluster) Proxies() []cluster.Proxy { return []cluster.Proxy{c.px} }

// WaitSynced programs a change as three syncs: 2 rules (the Service), 2 rules (its
// endpoints), none.
func (c *splitSyncCluster) WaitSynced(context.Context) error {
	if rv := c.ResourceVersion(); rv > c.px.rv {
		c.px.rv = rv
		for _, n := range []int{2, 2, 0} {
			c.px.be.sync(n)
			c.px.record(false)
		}
	}
	return nil
}

type splitSyncOpener struct{ c *splitSyncCluster }

func (o *splitSyncOpener) Name() string { return "fake" }
func (o *splitSyncOpener) Open(_ context.Context, sc *Scenario, _ string) (cluster.Cluster, func(context.Context) error, error) {
	o.c = &splitSyncCluster{Cluster: fake.New(sc.Topology.Nodes, *sc.Topology.Clients), px: &splitSyncProxy{be: &splitSyncBackend{}}}
	return o.c, func(context.Context) error { return nil }, nil
}

// TestPerRuleFindsTheSyncThatAddedTheService: when the proxy programs a new Service in
// several syncs and the last adds nothing, the perrule measurement still counts the rules
// of every sync since the write (it read the last sync's alone, and failed with "adding a
// service added no rule"), and the Service's time is the wall time of all those syncs.
func TestPerRuleFindsTheSyncThatAddedTheService(t *testing.T) {
	sc, err := ParseScenario("perrule.yaml", []byte(`apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: perrule-split
topology: {nodes: 1, clients: 1}
steps:
- {name: add-at-0, measure: {name: perrule, params: {adds: 2}}}
- {name: add-at-5, measure: {name: perrule, params: {prefill: 5, adds: 1}}}
`), "")
	require.NoError(t, err)
	op := &splitSyncOpener{}
	res, err := Run(context.Background(), sc, RunOptions{Opener: op})
	require.NoError(t, err)
	for _, c := range res.Cases {
		assert.Equal(t, reports.CasePass, c.Result, "%s: %s", c.Name, c.Reason)
	}
	require.Len(t, res.Runs, 1)
	var services []reports.Measurement
	for _, m := range res.Runs[0].Measurements {
		if m.Name == reports.MeasurePerRuleService {
			services = append(services, m)
		}
	}
	require.Len(t, services, 2, "one per step")
	assert.Equal(t, 4.0, services[0].Extra["rules_added"], "the Service's and its endpoints' rules, over two syncs")
	assert.Equal(t, []float64{0.03, 0.03}, services[0].Samples, "three syncs of 10 ms each")
	assert.Equal(t, 12.0, services[1].Extra["table_rules"], "after two Services and one prefill, 4 rules per change")
}
