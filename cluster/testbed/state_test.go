//go:build linux

package testbed

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStateCommands: a failure's node state holds the rule dump, IPVS's connection table
// where there is one, and conntrack's flows last.
func TestStateCommands(t *testing.T) {
	tests := []struct {
		backend string
		want    []string
	}{
		{"nftables", []string{"nft list table ip kube-proxy", "conntrack -L"}},
		{"kube-proxy-iptables", []string{"iptables-nft-save", "conntrack -L"}},
		{"ipvs", []string{"ipvsadm -Ln", "ipvsadm -Ln --stats", "ipvsadm -Lnc", "iptables-save -c", "ipset list", "ip -4 addr show", "ip -4 route show table all", "nft list ruleset", "conntrack -S", "nstat -asz", "conntrack -L"}},
		{"kube-proxy-ipvs", []string{"ipvsadm -Ln", "ipvsadm -Ln --stats", "ipvsadm -Lnc", "iptables-save -c", "ipset list", "ip -4 addr show", "ip -4 route show table all", "nft list ruleset", "conntrack -S", "nstat -asz", "conntrack -L"}},
		{"bogus", []string{"conntrack -L"}},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			var got []string
			for _, c := range stateCommands(tt.backend) {
				got = append(got, c.String())
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestDropScrapeFlows: the bench's scrapes of kube-proxy's metrics port leave a node's
// conntrack listing; a flow whose reply merely comes from that port stays.
func TestDropScrapeFlows(t *testing.T) {
	scrape := "tcp      6 66 TIME_WAIT src=172.18.0.10 dst=172.18.0.10 sport=57932 dport=10249 src=172.18.0.10 dst=172.18.0.10 sport=10249 dport=57932 [ASSURED] mark=0 use=1\n"
	probe := "tcp      6 118 TIME_WAIT src=10.244.0.2 dst=10.96.0.2 sport=10249 dport=80 src=10.244.0.4 dst=10.244.0.2 sport=80 dport=10249 [ASSURED] mark=0 use=1\n"
	tests := []struct{ name, in, want string }{
		{"scrapes only", scrape + scrape, "(left out: 2 flow(s) of the bench's own scrapes of kube-proxy's /metrics)\n"},
		{"probe kept", probe + scrape, probe + "(left out: 1 flow(s) of the bench's own scrapes of kube-proxy's /metrics)\n"},
		{"nothing to drop", probe, probe},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, dropScrapeFlows(tt.in)) })
	}
}
