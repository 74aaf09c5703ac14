//go:build unix

package reports

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCollectEnvironment(t *testing.T) {
	env := CollectEnvironment(context.Background())
	assert.Equal(t, runtime.NumCPU(), env.Cores)
	assert.Equal(t, runtime.Version(), env.GoVersion)
	assert.NotEmpty(t, env.Kernel)
	assert.NotEmpty(t, env.KernelRelease)
	assert.NotEmpty(t, env.KpbenchCommit)
	assert.Contains(t, []string{"native", "kvm", "tcg"}, env.Accelerator)
	assert.False(t, env.Date.IsZero())
	if runtime.GOOS == "linux" {
		assert.Positive(t, env.MemoryBytes)
	}
}

func TestMemTotal(t *testing.T) {
	tests := []struct {
		name, in string
		want     int64
	}{
		{"kB", "MemFree:  10 kB\nMemTotal:        4014436 kB\n", 4014436 * 1024},
		{"missing", "MemFree: 1 kB\n", 0},
		{"garbage", "MemTotal: lots kB\n", 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, memTotal([]byte(tt.in)), tt.name)
	}
}

func TestAccelerator(t *testing.T) {
	tests := []struct {
		name, cpuinfo, want string
	}{
		{"bare metal", "model name\t: AMD EPYC\nflags\t\t: fpu vme sse2\n", "native"},
		{"kvm guest", "model name\t: AMD EPYC\nflags\t\t: fpu hypervisor sse2\n", "kvm"},
		{"tcg", "model name\t: QEMU Virtual CPU version 2.5+\nflags\t\t: fpu hypervisor\n", "tcg"},
		{"flag substring is not the flag", "flags\t\t: fpu nohypervisorx\n", "native"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, accelerator([]byte(tt.cpuinfo)), tt.name)
	}
}

// TestSetTools: a tool root's versions replace the host's, a missing one is left empty
// (never the host's), and the host's stay without a root.
func TestSetTools(t *testing.T) {
	host := Environment{NFTVersion: "nftables v1.0.6", IPTablesVersion: "iptables v1.8.9 (nf_tables)", IPTablesRestoreVersion: "iptables-restore v1.8.9 (nf_tables)"}
	tests := []struct {
		name, spec, root string
		versions         map[string]string
		want             Environment
	}{
		{"host keeps the host's", "host", "", nil,
			Environment{NFTVersion: "nftables v1.0.6", IPTablesVersion: "iptables v1.8.9 (nf_tables)", IPTablesRestoreVersion: "iptables-restore v1.8.9 (nf_tables)", Tools: "host"}},
		{"root replaces", "debian:trixie", "/r", map[string]string{"nft": "nftables v1.1.3", "iptables": "iptables v1.8.11 (nf_tables)", "iptables-restore": "iptables-restore v1.8.11 (nf_tables)"},
			Environment{NFTVersion: "nftables v1.1.3", IPTablesVersion: "iptables v1.8.11 (nf_tables)", IPTablesRestoreVersion: "iptables-restore v1.8.11 (nf_tables)", Tools: "debian:trixie", ToolRoot: "/r"}},
		{"a version the root lacks is empty", "debian:trixie", "/r", map[string]string{"nft": "nftables v1.1.3"},
			Environment{NFTVersion: "nftables v1.1.3", Tools: "debian:trixie", ToolRoot: "/r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := host
			e.SetTools(tt.spec, tt.root, tt.versions)
			assert.Equal(t, tt.want, e)
		})
	}
}
