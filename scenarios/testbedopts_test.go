package scenarios

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTestbedOptions(t *testing.T) {
	src := scenario() + `proxy:
  iptables: {minSyncPeriod: 1s, syncPeriod: 1h, masqueradeBit: 12}
  nftables: {minSyncPeriod: 2s, syncPeriod: 2h}
  ipvs: {minSyncPeriod: 3s, syncPeriod: 3h, scheduler: wrr}
backendOptions:
  iptables: {wholeTableCache: true}
`
	sc, err := ParseScenario("t.yaml", []byte(src), "examples")
	require.NoError(t, err)
	for _, tc := range []struct {
		backend          string
		minSync, syncPer time.Duration
	}{
		{"iptables", time.Second, time.Hour},
		{"iptables-legacy", time.Second, time.Hour},
		{"nftables", 2 * time.Second, 2 * time.Hour},
		{"kube-proxy-nftables", 2 * time.Second, 2 * time.Hour},
		{"ipvs", 3 * time.Second, 3 * time.Hour},
		{"kube-proxy-ipvs", 3 * time.Second, 3 * time.Hour},
		{"kube-proxy-iptables", time.Second, time.Hour},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			o, err := sc.TestbedOptions(tc.backend, "lab1")
			require.NoError(t, err)
			assert.Equal(t, "lab1", o.Lab.Name)
			assert.Equal(t, 2, o.Lab.Nodes)
			assert.Equal(t, tc.minSync, o.MinSyncPeriod)
			assert.Equal(t, tc.syncPer, o.SyncPeriod)
			assert.Equal(t, 12, o.Settings.MasqueradeBit)
			assert.Equal(t, "wrr", o.Settings.Scheduler)
			assert.True(t, o.Settings.IPTablesWholeTableCache)
		})
	}

	plain, err := ParseScenario("t.yaml", []byte(scenario()), "examples")
	require.NoError(t, err)
	o, err := plain.TestbedOptions("iptables", "lab2")
	require.NoError(t, err)
	assert.False(t, o.Settings.IPTablesWholeTableCache, "off unless the scenario asks")
}
