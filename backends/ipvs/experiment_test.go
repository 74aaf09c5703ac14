//go:build linux

package ipvs

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

func TestApplyWeights(t *testing.T) {
	st := state(bt.Service("ns/a:p", "10.96.0.1:80", bt.EP("10.244.0.2:8080", bt.Local), bt.EP("10.244.0.3:8080", bt.Local), bt.EP("10.244.0.4:8080", bt.Local, bt.Terminating)))
	k := key(backends.TCP, "10.96.0.1:80")
	tests := []struct {
		name    string
		weights map[netip.Addr]int
		want    map[netip.AddrPort]int
	}{
		{"none: kube-proxy's 1", nil, map[netip.AddrPort]int{ap("10.244.0.2:8080"): 1, ap("10.244.0.3:8080"): 1, ap("10.244.0.4:8080"): 0}},
		{"some endpoints weighted", map[netip.Addr]int{ip("10.244.0.3"): 3},
			map[netip.AddrPort]int{ap("10.244.0.2:8080"): 1, ap("10.244.0.3:8080"): 3, ap("10.244.0.4:8080"): 0}},
		{"terminating keeps 0", map[netip.Addr]int{ip("10.244.0.4"): 5, ip("10.244.0.2"): 2},
			map[netip.AddrPort]int{ap("10.244.0.2:8080"): 2, ap("10.244.0.3:8080"): 1, ap("10.244.0.4:8080"): 0}},
		{"unknown address ignored", map[netip.Addr]int{ip("10.9.9.9"): 7},
			map[netip.AddrPort]int{ap("10.244.0.2:8080"): 1, ap("10.244.0.3:8080"): 1, ap("10.244.0.4:8080"): 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := Build(st, "wrr")
			m.ApplyWeights(tc.weights)
			require.Contains(t, m.Services, k)
			assert.Equal(t, tc.want, m.Services[k].Dests)
		})
	}
}

func TestApplyWeightsMakesTheDiffUpdateInPlace(t *testing.T) {
	st := state(bt.Service("ns/a:p", "10.96.0.1:80", bt.EP("10.244.0.2:8080", bt.Local), bt.EP("10.244.0.3:8080", bt.Local)))
	have := Build(st, "wrr")
	want := Build(st, "wrr")
	want.ApplyWeights(map[netip.Addr]int{ip("10.244.0.3"): 4})
	p := Diff(want, have, nil)
	assert.Equal(t, []DestChange{{Service: key(backends.TCP, "10.96.0.1:80"), Dest: ap("10.244.0.3:8080"), Weight: 4}}, p.UpdateDests)
	assert.Equal(t, 1, p.Ops())
}

func TestValidateWeights(t *testing.T) {
	tests := []struct {
		name    string
		weights map[netip.Addr]int
		wantErr string
	}{
		{"ok", map[netip.Addr]int{ip("10.0.0.1"): 0, ip("10.0.0.2"): MaxWeight}, ""},
		{"negative", map[netip.Addr]int{ip("10.0.0.1"): -1}, "want 0..65535"},
		{"too big", map[netip.Addr]int{ip("10.0.0.1"): MaxWeight + 1}, "want 0..65535"},
		{"ipv6", map[netip.Addr]int{ip("fd00::1"): 1}, "only IPv4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateWeights(tc.weights)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
