package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
)

func TestDiffRulesBadInput(t *testing.T) {
	testutil.RequireRoot(t) // PreRunE refuses before the flags are judged
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"families differ", []string{"diff-rules", "x.yaml", "--backend", "iptables", "--against", "nftables"}, "write different rule families"},
		{"not a rule backend", []string{"diff-rules", "x.yaml", "--backend", "ipvs"}, "allowed values are iptables"},
		{"no scenario", []string{"diff-rules", "--backend", "iptables"}, "accepts 1 arg"},
		{"missing scenario", []string{"diff-rules", "/nonexistent/s.yaml", "--backend", "iptables", "--against", "iptables-legacy"}, "/nonexistent/s.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, exitBadInput, run(tt.args, &out, &errOut), "stderr: %s", errOut.String())
			assert.Contains(t, errOut.String(), tt.wantErr)
		})
	}
}

func TestUnifiedDiff(t *testing.T) {
	d, err := unifiedDiff(context.Background(), "a", "x\ny\n", "b", "x\ny\n")
	require.NoError(t, err)
	assert.Empty(t, d)
	d, err = unifiedDiff(context.Background(), "ours", "x\ny\n", "theirs", "x\nz\n")
	require.NoError(t, err)
	assert.Contains(t, d, "--- ours")
	assert.Contains(t, d, "+++ theirs")
	assert.Contains(t, d, "-y\n+z\n")
}

// TestDiffRulesSameRules: two iptables flavours program the same rules for a seed example,
// so diff-rules exits 0 (a real end-to-end run: two labs, two syncs, two dumps).
func TestDiffRulesSameRules(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-nft-save", "iptables-legacy-save", "diff")
	var out, errOut bytes.Buffer
	code := run([]string{"diff-rules", "../../scenarios/examples/nginx-nodeport.scenario.yaml", "--backend", "iptables", "--against", "iptables-legacy"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
	assert.Contains(t, out.String(), "no difference between iptables and iptables-legacy on node-0")
}
