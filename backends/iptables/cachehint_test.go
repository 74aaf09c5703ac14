//go:build linux

package iptables

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

func TestWithCacheHint(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"nat after filter", "*filter\n:A - [0:0]\nCOMMIT\n*nat\n:B - [0:0]\nCOMMIT\n", "*filter\n:A - [0:0]\nCOMMIT\n*nat\n-S\n:B - [0:0]\nCOMMIT\n"},
		{"nat first", "*nat\n-A B -j RETURN\nCOMMIT\n", "*nat\n-S\n-A B -j RETURN\nCOMMIT\n"},
		{"no nat table", "*filter\nCOMMIT\n", "*filter\nCOMMIT\n"},
		{"a later real header", "*filter\n-A X -m comment --comment \"a*nat\n\"\nCOMMIT\n*nat\nCOMMIT\n", "*filter\n-A X -m comment --comment \"a*nat\n\"\nCOMMIT\n*nat\n-S\nCOMMIT\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, string(withCacheHint([]byte(tc.in))))
		})
	}
}

func TestCacheHintPays(t *testing.T) {
	active := func(n int) map[string]struct{} {
		m := make(map[string]struct{}, n)
		for i := range n {
			m[itoa(i)] = struct{}{}
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		g        Result
		full     bool
		services int
		want     bool
	}{
		// 1k Services x 2 endpoints: ~7k rules, 3k chains.
		{"full 1k", Result{Rules: 7000, Active: active(3000)}, true, 1000, false},
		{"full 5k", Result{Rules: 35000, Active: active(15000)}, true, 5000, true},
		{"partial 5k, one changed", Result{Rules: 5010, ChangedServices: 1, Active: active(15000)}, false, 5000, false},
		{"partial 10k, one changed: the hint cost more than it saved", Result{Rules: 10016, ChangedServices: 1, Active: active(30000)}, false, 10000, false},
		{"partial 12k, one changed", Result{Rules: 12016, ChangedServices: 1, Active: active(36000)}, false, 12000, false},
		{"partial 15k, one changed", Result{Rules: 15016, ChangedServices: 1, Active: active(45000)}, false, 15000, true},
		{"partial 20k, one changed", Result{Rules: 20010, ChangedServices: 1, Active: active(60000)}, false, 20000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, cacheHintPays(tc.g, tc.full, tc.services, cacheHintWork))
		})
	}
}

// TestSyncCacheHint checks where the hint goes: only with WholeTableCache, only on the nft
// flavour, only when it pays, and always with the listing discarded.
func TestSyncCacheHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		services int
		want     bool
	}{
		{"off by default", Options{Flavor: FlavorNFT}, 5000, false},
		{"nft, large", Options{Flavor: FlavorNFT, WholeTableCache: true}, 5000, true},
		{"nft, small", Options{Flavor: FlavorNFT, WholeTableCache: true}, 100, false},
		{"legacy ignores it", Options{Flavor: FlavorLegacy, WholeTableCache: true}, 5000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := &fakeExec{}
			tc.opts.NodeName = "n"
			b := newBackend(tc.opts, fx, bt.NewConntrack())
			_, err := b.Sync(context.Background(), bigState(tc.services))
			require.NoError(t, err)
			r := fx.restores()
			require.Len(t, r, 1)
			in := string(r[0].Stdin)
			assert.Equal(t, tc.want, strings.Contains(in, "\n*nat\n-S\n"))
			assert.Equal(t, tc.want, r[0].DiscardStdout)
			_, err = ParseRestore([]byte(strings.Replace(in, "\n-S\n", "\n", 1)))
			assert.NoError(t, err, "the rest of the input is unchanged restore input")
		})
	}
}

// TestPrivilegedCacheHintSameRules programs the same states into two namespaces, one with
// the hint on every restore, and compares what the kernel holds: the hint may change the
// cost, never the rules.
func TestPrivilegedCacheHintSameRules(t *testing.T) {
	requireFlavour(t, FlavorNFT)
	ctx := context.Background()
	dumps := map[bool][]string{}
	for _, hint := range []bool{false, true} {
		_, path := testutil.NewNetNS(t)
		fx := &countingExec{inner: netns.Tools{NSPath: path}}
		b := newBackend(Options{NodeName: "n", NetNSPath: path, Flavor: FlavorNFT, LockFile: filepath.Join(t.TempDir(), "lock"), WholeTableCache: hint}, fx, bt.NewConntrack())
		b.hintWork = 0 // hint every restore, however small
		st := bigState(50)
		st2 := bigState(50)
		st2.Services[7].Endpoints = st2.Services[7].Endpoints[:1]
		st2.Services = st2.Services[:40]
		for i, s := range []*backends.State{st, st2} {
			_, err := b.Sync(ctx, s)
			require.NoError(t, err)
			for _, table := range []string{"nat", "filter", "mangle"} {
				dumps[hint] = append(dumps[hint], comparableSave(save(t, path, FlavorNFT, table)))
			}
			assert.Equal(t, hint, fx.hinted == i+1, "hinted restores after sync %d", i+1)
		}
	}
	require.Len(t, dumps[true], 6)
	for i := range dumps[false] {
		assert.Equal(t, dumps[false][i], dumps[true][i], "dump %d", i)
	}
}

// countingExec runs commands for real and counts the restores that carried the hint.
type countingExec struct {
	inner  execer
	hinted int
}

func (c *countingExec) Exec(ctx context.Context, cmd netns.Command) (execResult, error) {
	if strings.Contains(string(cmd.Stdin), "\n*nat\n-S\n") {
		c.hinted++
	}
	return c.inner.Exec(ctx, cmd)
}

// comparableSave drops iptables-save's comment and timestamp lines.
func comparableSave(dump string) string {
	var keep []string
	for _, l := range strings.Split(dump, "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
