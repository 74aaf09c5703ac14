package kubestack

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/lab"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Name: "demo"}
	c.Default()
	assert.Equal(t, Config{Name: "demo", Nodes: 2, Proxy: kubeproxy.ModeNFTables, MinSyncPeriod: time.Second,
		Dir: DefaultDir, LabRegistryDir: lab.DefaultRegistryDir, StartTimeout: 3 * time.Minute}, c)
	require.NoError(t, c.Validate())
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "bad name", cfg: Config{Name: "Demo!"}, wantErr: `lab name "Demo!": must be 1-10 characters of a-z and 0-9`},
		{name: "too many nodes", cfg: Config{Name: "d", Nodes: MaxNodes + 1}, wantErr: "nodes: 17 is out of range 1-16"},
		{name: "negative clients", cfg: Config{Name: "d", Clients: -1}, wantErr: "clients: -1 is out of range"},
		{name: "bad port", cfg: Config{Name: "d", Port: 70000}, wantErr: "port: 70000 is out of range 0-65535"},
		{name: "bad proxy", cfg: Config{Name: "d", Proxy: "userspace"}, wantErr: `proxy "userspace": allowed values are iptables, nftables, ipvs`},
		{name: "negative min sync", cfg: Config{Name: "d", MinSyncPeriod: -time.Second}, wantErr: "minSyncPeriod: -1s is negative"},
		{name: "ipvs is a valid mode (the kernel is asked by CheckProxy)", cfg: Config{Name: "d", Proxy: kubeproxy.ModeIPVS}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Default()
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			assert.True(t, errors.Is(err, ErrBadConfig), "bad input: %v", err)
		})
	}
}

func TestRegistry(t *testing.T) {
	reg := Registry{Dir: t.TempDir()}
	_, err := reg.Read("demo")
	require.ErrorIs(t, err, lab.ErrNotRegistered)
	names, err := reg.List()
	require.NoError(t, err)
	assert.Empty(t, names)

	rec := &Record{Entry: lab.Entry{Name: "demo", PID: 42, State: lab.StateReady}, Proxy: "nftables", Nodes: 2, Kubeconfig: reg.Kubeconfig("demo"),
		Processes: []ProcessRecord{{Component: "kube-proxy", Node: "node-0", PID: 43, Binary: "/bin/kube-proxy"}},
		Startup:   &Startup{Total: 12.5}}
	require.NoError(t, reg.Write(rec))
	require.NoError(t, reg.Write(&Record{Entry: lab.Entry{Name: "b"}}))
	got, err := reg.Read("demo")
	require.NoError(t, err)
	assert.Equal(t, rec, got)
	assert.Equal(t, filepath.Join(reg.Dir, "demo", "kubeconfig"), got.Kubeconfig)
	names, err = reg.List()
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "demo"}, names)

	require.NoError(t, os.WriteFile(filepath.Join(reg.Dir, "b", "cluster.json"), []byte("{"), 0o644))
	_, err = reg.Read("b")
	assert.ErrorContains(t, err, "corrupt record")

	require.NoError(t, reg.Remove("demo"))
	assert.NoDirExists(t, reg.ClusterDir("demo"))
	require.NoError(t, reg.Remove("demo"), "removing twice is fine")
}
