package kubeproxy

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigRender(t *testing.T) {
	base := Config{Mode: ModeIPTables, NodeName: "node-1", NodeIP: netip.MustParseAddr("172.18.0.11"), Kubeconfig: "/run/kpbench/x/kubeconfig-node-1"}
	tests := []struct {
		name    string
		mod     func(*Config)
		want    []string
		wantErr string
	}{
		{name: "defaults", want: []string{
			"mode: iptables\n", "hostnameOverride: node-1\n",
			"metricsBindAddress: 172.18.0.11:10249\n", "healthzBindAddress: 172.18.0.11:10256\n",
			`kubeconfig: "/run/kpbench/x/kubeconfig-node-1"`, "minSyncPeriod: 1ns\n", "syncPeriod: 30s\n",
			"masqueradeBit: 14\n", "scheduler: rr\n", "maxPerCore: 0\n",
		}},
		{name: "scenario values", mod: func(c *Config) {
			c.Mode, c.MinSyncPeriod, c.SyncPeriod, c.MasqueradeBit, c.MasqueradeAll = ModeNFTables, 0, 0, 12, true
			c.MinSyncPeriod, c.SyncPeriod = 250*time.Millisecond, time.Minute
			c.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
		}, want: []string{"mode: nftables\n", "minSyncPeriod: 250ms\n", "syncPeriod: 1m0s\n", "masqueradeBit: 12\n", "masqueradeAll: true\n", "clusterCIDR: 10.244.0.0/16\n"}},
		{name: "ipvs scheduler", mod: func(c *Config) { c.Mode, c.Scheduler = ModeIPVS, "mh" }, want: []string{"mode: ipvs\n", "scheduler: mh\n"}},
		{name: "unknown mode", mod: func(c *Config) { c.Mode = "userspace" }, wantErr: "unknown mode"},
		{name: "no kubeconfig", mod: func(c *Config) { c.Kubeconfig = "" }, wantErr: "kubeconfig are required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			if tc.mod != nil {
				tc.mod(&c)
			}
			out, err := c.Render()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			for _, w := range tc.want {
				assert.Contains(t, string(out), w)
			}
		})
	}
}

var updateConfig = flag.Bool("update", false, "rewrite testdata/config-*.golden")

// TestConfigByVersion: the file a kube-proxy release is started with holds only what that
// release accepts: v1.37.2 (the bare backend name) and v1.31+ get the same file, v1.29 and
// v1.30 need the NFTablesProxyMode gate for the nftables mode, and before v1.29 there is
// neither an nftables mode nor an nftables section.
func TestConfigByVersion(t *testing.T) {
	base := Config{
		NodeName: "node-1", NodeIP: netip.MustParseAddr("172.18.0.11"), Kubeconfig: "/run/kpbench/x/kubeconfig-node-1",
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
	}
	tests := []struct {
		golden  string
		mode    Mode
		version string
		wantErr string
	}{
		{golden: "config-v1.37.2-nftables", mode: ModeNFTables, version: ""},
		{golden: "config-v1.37.2-nftables", mode: ModeNFTables, version: "v1.37.2"},
		{golden: "config-v1.37.2-nftables", mode: ModeNFTables, version: "v1.33.5"},
		{golden: "config-v1.30.0-nftables", mode: ModeNFTables, version: "v1.30.0"},
		{golden: "config-v1.30.0-iptables", mode: ModeIPTables, version: "v1.30.0"},
		{golden: "config-v1.28.0-iptables", mode: ModeIPTables, version: "v1.28.0"},
		{mode: ModeNFTables, version: "v1.28.0", wantErr: "kube-proxy v1.28.0 has no nftables mode (it came in v1.29.0)"},
		{mode: ModeIPTables, version: "1.30", wantErr: `version "1.30": want vMAJOR.MINOR.PATCH`},
	}
	for _, tc := range tests {
		t.Run(tc.golden+tc.version, func(t *testing.T) {
			c := base
			c.Mode, c.Version = tc.mode, tc.version
			out, err := c.Render()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			path := filepath.Join("testdata", tc.golden+".golden")
			if *updateConfig {
				require.NoError(t, os.WriteFile(path, out, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "go test -update writes %s", path)
			assert.Equal(t, string(want), string(out))
		})
	}
}
