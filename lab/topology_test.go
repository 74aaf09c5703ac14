package lab

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"defaults", func(*Config) {}, ""},
		{"bad name", func(c *Config) { c.Name = "Bad_Name" }, "lab name"},
		{"long name", func(c *Config) { c.Name = "abcdefghijk" }, "lab name"},
		{"zero nodes", func(c *Config) { c.Nodes = -1 }, "nodes"},
		{"too many nodes", func(c *Config) { c.Nodes = MaxNodes + 1 }, "nodes"},
		{"too many pods", func(c *Config) { c.Nodes, c.PodsPerNode = 10, 2001 }, "exceeds the limit"},
		{"too many clients", func(c *Config) { c.Clients = 33 }, "clients"},
		{"overlap", func(c *Config) { c.NodeCIDR = netip.MustParsePrefix("10.244.0.0/24") }, "overlaps"},
		{"pod cidr too small", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.244.0.0/24") }, "too small"},
		{"ipv6", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("fd00::/64") }, "IPv4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Name: "t1", Nodes: 3, PodsPerNode: 10, Clients: 1}
			c.Default()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestAddressing(t *testing.T) {
	c := Config{Name: "t1", Nodes: 3, PodsPerNode: 10}
	c.Default()
	require.NoError(t, c.Validate())
	assert.Equal(t, "10.244.2.0/24", c.NodePodCIDR(2).String())
	assert.Equal(t, "172.18.0.11", c.NodeIP(1).String())
	assert.Equal(t, "172.18.0.200", c.ClientIP(0).String())

	c.PodsPerNode = 300 // does not fit a /24: blocks grow to /23
	require.NoError(t, c.Validate())
	assert.Equal(t, "10.244.0.0/23", c.NodePodCIDR(0).String())
	assert.Equal(t, "10.244.4.0/23", c.NodePodCIDR(2).String())
}
