//go:build linux

package perrule

import (
	"context"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/backends/iptables"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

var counters = regexp.MustCompile(` \[\d+:\d+\]`)

// saved returns iptables-save of filter, nat and mangle in the namespace, without comment
// lines and counters.
func saved(t *testing.T, path string, f iptables.Flavor) string {
	t.Helper()
	_, _, save := f.Binaries()
	var out []string
	for _, table := range []string{"filter", "nat", "mangle"} {
		var res []byte
		require.NoError(t, netns.Do(path, func() error {
			var err error
			res, err = execOutput(save, "-t", table)
			return err
		}))
		for _, l := range strings.Split(string(res), "\n") {
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			out = append(out, counters.ReplaceAllString(l, ""))
		}
	}
	return strings.Join(out, "\n")
}

func smallState(extra bool) *backends.State {
	a := &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: "ns1", Name: "a", Port: "http", Protocol: backends.TCP},
		ClusterIP: netip.MustParseAddr("172.30.0.1"), Port: 80, NodePort: 30080,
		Endpoints: []backends.Endpoint{bt.EP("10.1.0.2:8080", bt.Local), bt.EP("10.1.0.3:8080"), bt.EP("10.1.0.4:8080")},
	}
	b := &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: "ns1", Name: "b", Port: "dns", Protocol: backends.UDP},
		ClusterIP: netip.MustParseAddr("172.30.0.2"), Port: 53, AffinityClientIP: true, AffinityTimeoutSeconds: 600,
		Endpoints: []backends.Endpoint{bt.EP("10.1.0.5:5353"), bt.EP("10.1.0.6:5353")},
	}
	c := &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: "ns1", Name: "c", Protocol: backends.TCP},
		ClusterIP: netip.MustParseAddr("172.30.0.3"), Port: 443,
	}
	st := &backends.State{NodeName: "node-1", NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.0.1")},
		ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8"), Services: []*backends.ServicePort{a, b, c}}
	if extra {
		a.Endpoints = a.Endpoints[:2]
		c.Endpoints = []backends.Endpoint{bt.EP("10.1.0.9:8443")}
		b.AffinityClientIP = false
		st.Services = append(st.Services, &backends.ServicePort{
			Name:      backends.ServicePortName{Namespace: "ns2", Name: "d", Protocol: backends.TCP},
			ClusterIP: netip.MustParseAddr("172.30.0.4"), Port: 80, ExternalPolicyLocal: true, NodePort: 30081,
			Endpoints: []backends.Endpoint{bt.EP("10.1.0.7:80", bt.Local), bt.EP("10.1.0.8:80")},
		})
	}
	st.SortServices()
	return st
}

func TestPrivilegedPerRuleMatchesRestore(t *testing.T) {
	for _, f := range []iptables.Flavor{iptables.FlavorLegacy, iptables.FlavorNFT} {
		t.Run(string(f), func(t *testing.T) {
			testutil.RequireRoot(t)
			bin, restore, save := f.Binaries()
			testutil.RequireBinary(t, bin, restore, save)
			_, p1 := testutil.NewNetNS(t)
			_, p2 := testutil.NewNetNS(t)
			ctx := context.Background()
			pr := New(Options{NodeName: "node-1", NetNSPath: p1, Flavor: f})
			ref := iptables.New(iptables.Options{NodeName: "node-1", NetNSPath: p2, Flavor: f, LockFile: filepath.Join(t.TempDir(), "lock")})
			assert.Equal(t, "iptables-perrule", pr.Name())

			for i, st := range []*backends.State{smallState(false), smallState(true), smallState(false)} {
				mark := pr.Syncs()
				res, err := pr.Sync(ctx, st)
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, i == 0, res.Full)
				_, err = ref.Sync(ctx, st)
				require.NoError(t, err)
				got, want := saved(t, p1, f), saved(t, p2, f)
				require.Contains(t, want, "KUBE-SVC-")
				assert.Equal(t, want, got, "step %d", i)
				timings := pr.RuleTimings()
				require.NotEmpty(t, timings)
				since, complete := pr.RuleTimingsSince(mark)
				assert.True(t, complete)
				assert.Equal(t, timings, since, "the rules since the mark are the one sync's")
				if i > 0 {
					assert.Less(t, len(timings), 40, "a partial change adds only the rules that differ")
				}
			}
			require.NoError(t, pr.Cleanup(ctx))
			assert.NotContains(t, saved(t, p1, f), "KUBE-")
		})
	}
}
