package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends/all"
)

// TestSelectBackends: --backend-if-available adds what the machine can run, after
// --backend's list and without repeating it, and says in one line why it left one out;
// the machine is a fixture, so both answers are checked here without root or IPVS.
func TestSelectBackends(t *testing.T) {
	noIPVS := errors.New("this kernel has no IPVS (asked generic netlink)")
	withIPVS, withoutIPVS := all.Machine{}, all.Machine{IPVS: noIPVS}
	const bench = "iptables,iptables-legacy,nftables"
	tests := []struct {
		name                 string
		backend, ifAvailable string
		m                    all.Machine
		want                 []string
		wantLine             string // "" means no line at all
		wantErr              string // bad input (exit 2)
	}{
		{name: "make bench where the kernel has IPVS", backend: bench, ifAvailable: "ipvs", m: withIPVS,
			want: []string{"iptables", "iptables-legacy", "nftables", "ipvs"}},
		{name: "make bench without IPVS: as before, and one line says why", backend: bench, ifAvailable: "ipvs", m: withoutIPVS,
			want: []string{"iptables", "iptables-legacy", "nftables"}, wantLine: "kpbench run: ipvs left out: " + noIPVS.Error() + "\n"},
		{name: "without the flag the machine is not asked", backend: bench, m: withoutIPVS,
			want: []string{"iptables", "iptables-legacy", "nftables"}},
		{name: "named in both: once, where --backend put it", backend: "ipvs,nftables", ifAvailable: "nftables,ipvs", m: withIPVS,
			want: []string{"ipvs", "nftables"}},
		{name: "the flag's order is kept", backend: "nftables", ifAvailable: "kube-proxy-nftables,ipvs", m: withIPVS,
			want: []string{"nftables", "kube-proxy-nftables", "ipvs"}},
		{name: "only the flag, and it can run", ifAvailable: "ipvs", m: withIPVS, want: []string{"ipvs"}},
		{name: "only the flag, and nothing can run", ifAvailable: "ipvs", m: withoutIPVS,
			wantLine: "kpbench run: ipvs left out: " + noIPVS.Error() + "\n", wantErr: "none of them can run on this machine"},
		{name: "an unknown name", backend: bench, ifAvailable: "ipvsx", m: withIPVS, wantErr: `--backend-if-available "ipvsx": allowed values are`},
		{name: "all is --backend's", backend: bench, ifAvailable: "all", m: withIPVS, wantErr: "all and ours are --backend's"},
		{name: "--backend's own bad input", backend: "bogus", ifAvailable: "ipvs", m: withIPVS, wantErr: `--backend "bogus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w bytes.Buffer
			asked := false
			got, err := selectBackends(&w, "kpbench run", tt.backend, tt.ifAvailable, func() all.Machine { asked = true; return tt.m })
			assert.Equal(t, tt.wantLine, w.String(), "what it says it left out")
			if tt.ifAvailable == "" {
				assert.False(t, asked, "asked the machine without --backend-if-available")
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.ErrorAs(t, err, new(usageError), "bad input: exit 2")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
