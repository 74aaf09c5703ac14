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
