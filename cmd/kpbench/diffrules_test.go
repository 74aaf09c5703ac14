package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
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

// TestDiffRulesUpstreamNFTables: our nftables backend writes what kube-proxy v1.37.2's
// nftables mode writes (normalised), for both seed examples and every conformance
// scenario, the API server's own default/kubernetes Service included.
func TestDiffRulesUpstreamNFTables(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "nft", "diff")
	upstreamtest.Require(t)
	files, err := filepath.Glob("../../scenarios/conformance/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	files = append([]string{
		"../../scenarios/examples/nginx-nodeport.scenario.yaml",
		"../../scenarios/examples/inference.scenario.yaml",
	}, files...)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run([]string{"diff-rules", f, "--backend", "nftables", "--against", "kube-proxy-nftables"}, &out, &errOut)
			assert.Contains(t, errOut.String(), "default/kubernetes Service (2 objects) is applied to nftables")
			if code != exitOK && onlyUnallocatedDrop(out.String()) {
				// kube-proxy writes this rule in a full sync after its ServiceCIDR
				// informer has delivered, and a ServiceCIDR change triggers no sync: when
				// the CIDR arrives after its first sync, the rule is missing until the next
				// full one (seen in 2 of 21 cases once). Upstream's race, not ours.
				t.Logf("kube-proxy had not written the unallocated-ClusterIP drop yet:\n%s", out.String())
				return
			}
			require.Equal(t, exitOK, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
			assert.Contains(t, out.String(), "no difference between nftables and kube-proxy-nftables")
		})
	}
}

// onlyUnallocatedDrop reports whether a diff-rules diff consists of our drop of
// unallocated ClusterIPs alone, missing on upstream's side.
func onlyUnallocatedDrop(diff string) bool {
	changed := 0
	for _, l := range strings.Split(diff, "\n") {
		if l == "" || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "@@") || strings.HasPrefix(l, " ") {
			continue
		}
		if !strings.HasPrefix(l, "-") || !strings.Contains(l, `drop comment "Drop traffic to unallocated ClusterIPs"`) {
			return false
		}
		changed++
	}
	return changed == 1
}

func TestOnlyUnallocatedDrop(t *testing.T) {
	drop := "--- nftables\n+++ kube-proxy-nftables\n@@ -1,3 +1,2 @@\n   chain cluster-ips-check\n-    ip daddr 10.96.0.0/12 drop comment \"Drop traffic to unallocated ClusterIPs\"\n"
	assert.True(t, onlyUnallocatedDrop(drop))
	assert.False(t, onlyUnallocatedDrop(drop+"-    element 10.96.0.2\n"), "another difference")
	assert.False(t, onlyUnallocatedDrop(strings.Replace(drop, "\n-    ip", "\n+    ip", 1)), "upstream has it, we do not")
}
