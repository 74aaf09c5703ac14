//go:build linux

package measure

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/backends/all"
)

// TestEveryBackendHasARuleDump: a backend the rules measurement cannot read fails every
// ladder that counts rules (make bench did, for kube-proxy-*).
func TestEveryBackendHasARuleDump(t *testing.T) {
	for _, name := range all.Names() {
		cmd, ok := ruleDumpCommand(name)
		assert.True(t, ok, "%s: no rule dump", name)
		assert.NotEmpty(t, cmd.Path, name)
	}
	_, ok := ruleDumpCommand("bogus")
	assert.False(t, ok)
}

// TestStateCommands: a failure's node state holds the rule dump, IPVS's connection table
// where there is one, and conntrack's flows last.
func TestStateCommands(t *testing.T) {
	tests := []struct {
		backend string
		want    []string
	}{
		{"nftables", []string{"nft list table ip kube-proxy", "conntrack -L"}},
		{"kube-proxy-iptables", []string{"iptables-nft-save", "conntrack -L"}},
		{"ipvs", []string{"ipvsadm -Ln", "ipvsadm -Ln --stats", "ipvsadm -Lnc", "conntrack -L"}},
		{"kube-proxy-ipvs", []string{"ipvsadm -Ln", "ipvsadm -Ln --stats", "ipvsadm -Lnc", "conntrack -L"}},
		{"bogus", []string{"conntrack -L"}},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			var got []string
			for _, c := range stateCommands(tt.backend) {
				got = append(got, strings.TrimSpace(c.Path+" "+strings.Join(c.Args, " ")))
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
