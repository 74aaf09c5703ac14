//go:build linux

package perrule

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/iptables"
	"kpbench.dev/kpbench/internal/testutil"
)

func TestBulkInput(t *testing.T) {
	svc := chainKey{"nat", "KUBE-SERVICES"}
	a := chainKey{"nat", "KUBE-SVC-A"}
	b := chainKey{"nat", "KUBE-SVC-B"}
	f := chainKey{"filter", "KUBE-FORWARD"}
	rule := func(args ...string) []string { return args }
	tests := []struct {
		name      string
		order     []chainKey
		installed map[chainKey][][]string
		want      map[chainKey][][]string
		input     string
		rules     int
	}{
		{"nothing changed: no input", []chainKey{svc},
			map[chainKey][][]string{svc: {rule("-j", "KUBE-SVC-A")}},
			map[chainKey][][]string{svc: {rule("-j", "KUBE-SVC-A")}}, "", 0},
		{"everything on a first sync, comments quoted", []chainKey{f, svc, a},
			map[chainKey][][]string{},
			map[chainKey][][]string{f: {rule("-j", "ACCEPT")}, svc: {rule("-m", "comment", "--comment", "ns/a cluster IP", "-j", "KUBE-SVC-A")}, a: nil},
			"*filter\n:KUBE-FORWARD - [0:0]\n-A KUBE-FORWARD -j ACCEPT\nCOMMIT\n" +
				"*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n-A KUBE-SERVICES -m comment --comment \"ns/a cluster IP\" -j KUBE-SVC-A\nCOMMIT\n", 2},
		{"only the changed chain, the stale one flushed and deleted", []chainKey{svc, a},
			map[chainKey][][]string{svc: {rule("-j", "KUBE-SVC-A"), rule("-j", "KUBE-SVC-B")}, a: {rule("-j", "DNAT")}, b: {rule("-j", "DNAT")}},
			map[chainKey][][]string{svc: {rule("-j", "KUBE-SVC-A")}, a: {rule("-j", "DNAT")}},
			"*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-B - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-A\n-X KUBE-SVC-B\nCOMMIT\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input, n := bulkInput(tt.order, tt.installed, tt.want)
			assert.Equal(t, tt.input, string(input))
			assert.Equal(t, tt.rules, n)
		})
	}
}

// In bulk mode the backend still ends with the iptables backend's rules, records no rule
// timings, and knows what it installed: the per-rule sync that follows adds only the
// rules that differ.
func TestPrivilegedBulkThenPerRule(t *testing.T) {
	testutil.RequireRoot(t)
	f := iptables.FlavorLegacy
	bin, restore, save := f.Binaries()
	testutil.RequireBinary(t, bin, restore, save)
	_, p1 := testutil.NewNetNS(t)
	_, p2 := testutil.NewNetNS(t)
	ctx := context.Background()
	pr := New(Options{NodeName: "node-1", NetNSPath: p1, Flavor: f})
	ref := iptables.New(iptables.Options{NodeName: "node-1", NetNSPath: p2, Flavor: f, LockFile: filepath.Join(t.TempDir(), "lock")})
	t.Cleanup(func() { _ = pr.Cleanup(context.Background()) })

	steps := []struct {
		st   *backends.State
		bulk bool
	}{{smallState(false), true}, {smallState(true), true}, {smallState(false), false}, {smallState(true), false}}
	for i, s := range steps {
		pr.SetBulk(s.bulk)
		res, err := pr.Sync(ctx, s.st)
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, i == 0, res.Full, "step %d", i)
		_, err = ref.Sync(ctx, s.st)
		require.NoError(t, err)
		got, want := saved(t, p1, f), saved(t, p2, f)
		require.Contains(t, want, "KUBE-SVC-")
		assert.Equal(t, want, got, "step %d", i)
		timings := pr.RuleTimings()
		if s.bulk {
			assert.Empty(t, timings, "a bulk sync times no rule")
			continue
		}
		require.NotEmpty(t, timings)
		assert.Less(t, len(timings), 40, "after a bulk prefill a change adds only the rules that differ")
	}
}
