package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRelaunchArgs: a detached owner is started with the command and every flag the user
// gave, but --detach (else it would detach again, forever), and nothing the user did not
// give (the defaults are the child's own).
func TestRelaunchArgs(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"lab up", []string{"lab", "up", "--name", "demo", "--nodes", "3", "--detach"},
			[]string{"lab", "up", "--name=demo", "--nodes=3"}},
		{"cluster up", []string{"cluster", "up", "--detach=true", "--proxy", "nftables", "--name", "c1", "--kube-proxy-min-sync-period", "250ms", "--registry", "/tmp/labs"},
			[]string{"cluster", "up", "--kube-proxy-min-sync-period=250ms", "--name=c1", "--proxy=nftables", "--registry=/tmp/labs"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd, rest, err := newRootCmd().Find(tt.args)
			require.NoError(t, err)
			require.NoError(t, cmd.ParseFlags(rest))
			assert.Equal(t, tt.want, relaunchArgs(cmd))
		})
	}
}
