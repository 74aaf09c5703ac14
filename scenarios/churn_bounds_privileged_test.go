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

// TestChurnCatchesBlackhole churns 100 Services with a prober on iptables and on
// iptables@blackhole-10 (a tenth of the Services' traffic dropped: probes time out,
// which is neither a misroute nor a refusal): the churn measurement passes on the first
// and fails on the second, on its bound of probes lost by live Services.
func TestChurnCatchesBlackhole(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-nft-restore")
	const src = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: churn-blackhole
topology: {nodes: 1, clients: 0}
proxy:
  iptables: {minSyncPeriod: 1s, syncPeriod: 1h}
steps:
- {name: grow, churn: {pattern: add, services: 100, endpointsPerService: 2, allAtOnce: true}}
- {name: synced, wait: {synced: true, timeout: 2m}}
- name: churn
  churn: {pattern: mixed, services: 100, endpointsPerService: 2, rate: 20, duration: 5s, probe: {workers: 8, interval: 10ms, timeout: 100ms, deadline: 10s}}
- {name: synced-after, wait: {synced: true, timeout: 1m}}
- name: correctness
  measure: {name: churn, limits: {churn-misroutes: 0, churn-false-refusals: 0}}
`
	sc, err := ParseScenario("churn-blackhole.yaml", []byte(src), ".")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, _ := Run(ctx, sc, RunOptions{Backends: []string{"iptables", "iptables@blackhole-10"}})
	require.NotNil(t, res)
	verdict := map[string]reports.Case{}
	for _, c := range res.Cases {
		if c.Name == "correctness" {
			verdict[c.Backend] = c
		}
		if c.Backend == "iptables" {
			assert.Equal(t, reports.CasePass, c.Result, "iptables: %s: %s", c.Name, c.Reason)
		}
	}
	require.Contains(t, verdict, "iptables@blackhole-10", "cases: %v", res.Cases)
	assert.Equal(t, reports.CaseFail, verdict["iptables@blackhole-10"].Result)
	assert.Contains(t, verdict["iptables@blackhole-10"].Reason, "probes of live Services timed out or were reset")
	for _, run := range res.Runs {
		for _, m := range run.Measurements {
			if m.Name == "churn-probe-failures" {
				t.Logf("%s: %v probe failures of %v live probes (%v in all)", run.Backend, m.Samples, m.Extra["live_probes"], m.Extra["probes"])
			}
		}
	}
}
