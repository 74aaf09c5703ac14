//go:build linux

package lab

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMachineCheck: a lab the machine cannot hold is refused before anything is made,
// with the limit named.
func TestMachineCheck(t *testing.T) {
	m := Machine{MemAvailable: 8 << 30, OpenFiles: 1 << 20, NetNamespaces: 100000}
	cfg := func(nodes, pods, clients int) Config {
		c := Config{Name: "t", Nodes: nodes, PodsPerNode: pods, Clients: clients}
		c.Default()
		return c
	}
	tests := []struct {
		name    string
		m       Machine
		cfg     Config
		wantErr string
	}{
		{"fits", m, cfg(3, 300, 1), ""},
		{"too many namespaces", Machine{MemAvailable: m.MemAvailable, OpenFiles: m.OpenFiles, NetNamespaces: 100}, cfg(3, 100, 1), "max_net_namespaces"},
		{"too few open files", Machine{MemAvailable: m.MemAvailable, OpenFiles: 1024, NetNamespaces: m.NetNamespaces}, cfg(2, 1000, 0), "RLIMIT_NOFILE"},
		{"too little memory", Machine{MemAvailable: 64 << 20, OpenFiles: m.OpenFiles, NetNamespaces: m.NetNamespaces}, cfg(1, 1000, 0), "MemAvailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Check(tt.cfg)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrMachineLimit)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestReadMachine reads this machine's limits: all of them are known and non-zero.
func TestReadMachine(t *testing.T) {
	m, err := ReadMachine()
	require.NoError(t, err)
	assert.NotZero(t, m.MemTotal)
	assert.NotZero(t, m.MemAvailable)
	assert.NotZero(t, m.OpenFiles)
	assert.NotZero(t, m.NetNamespaces)
}
