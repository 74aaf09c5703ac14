//go:build linux

package all

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends/ipvs"
)

// TestMachineDecidesByFacts: what a machine lacks leaves out exactly the backends whose
// facts need it, with the machine's own reason; nothing here needs root or IPVS.
func TestMachineDecidesByFacts(t *testing.T) {
	noUpstream := errors.New("upstream kube-proxy not found: run `make upstream`")
	tests := []struct {
		name    string
		m       Machine
		ref     string
		wantErr error // nil: it can run
	}{
		{name: "ipvs where the kernel has IPVS", m: Machine{}, ref: "ipvs"},
		{name: "ipvs without IPVS", m: Machine{IPVS: noIPVS{}}, ref: "ipvs", wantErr: noIPVS{}},
		{name: "netfilter backends need neither", m: Machine{IPVS: noIPVS{}, Upstream: noUpstream}, ref: "nftables"},
		{name: "a variant has its backend's needs", m: Machine{IPVS: noIPVS{}, Upstream: noUpstream}, ref: "iptables@same"},
		{name: "kube-proxy without make upstream", m: Machine{Upstream: noUpstream}, ref: "kube-proxy-nftables", wantErr: noUpstream},
		{name: "kube-proxy-ipvs on a kernel without IPVS", m: Machine{IPVS: noIPVS{}}, ref: "kube-proxy-ipvs", wantErr: noIPVS{}},
		{name: "kube-proxy-ipvs with both", m: Machine{}, ref: "kube-proxy-ipvs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, _ := Split(tt.ref)
			err := tt.m.CannotRun(tt.ref)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.Contains(t, tt.m.Available(), name, "in --backend all")
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.NotContains(t, tt.m.Available(), name, "not in --backend all")
		})
	}
	assert.ErrorContains(t, Machine{}.CannotRun("ipvsx"), "allowed values are", "an unknown name is Validate's error")
	assert.NotContains(t, Machine{}.Available(), "iptables-perrule", "runs only when named")
}

// TestNoIPVSSaysHowItWasFound: the reason a run prints says what was asked, and stays an
// ipvs.ErrNoIPVS for the callers that skip on it.
func TestNoIPVSSaysHowItWasFound(t *testing.T) {
	assert.ErrorIs(t, noIPVS{}, ipvs.ErrNoIPVS)
	assert.Contains(t, noIPVS{}.Error(), "genl ctrl get name IPVS")
	assert.Contains(t, noIPVS{}.Error(), "make vm-ladder")
	if HasIPVS() {
		assert.NoError(t, ThisMachine().IPVS)
	} else {
		assert.ErrorIs(t, ThisMachine().IPVS, ipvs.ErrNoIPVS)
	}
}
