//go:build linux

package iptables

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ti-mo/conntrack"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// flavours lists the flavours whose binaries are present, skipping (or failing) otherwise.
func requireFlavour(t testing.TB, f Flavor) {
	t.Helper()
	testutil.RequireRoot(t)
	ipt, restore, save := f.Binaries()
	testutil.RequireBinary(t, ipt, restore, save)
}

// save runs iptables-save for table inside the namespace.
func save(t testing.TB, path string, f Flavor, table string) string {
	t.Helper()
	_, _, s := f.Binaries()
	out, err := netns.Tools{NSPath: path}.Exec(context.Background(), netns.Command{Path: s, Args: []string{"-t", table}})
	require.NoError(t, err)
	return string(out.Stdout)
}

func ipt(t testing.TB, path string, f Flavor, args ...string) error {
	t.Helper()
	bin, _, _ := f.Binaries()
	_, err := netns.Tools{NSPath: path}.Exec(context.Background(), netns.Command{Path: bin, Args: append([]string{"-w"}, args...)})
	return err
}

// chainRules returns the -A lines of chain in an iptables-save dump.
func chainRules(dump, chain string) []string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			out = append(out, l)
		}
	}
	return out
}

func TestPrivilegedSync(t *testing.T) {
	for _, f := range []Flavor{FlavorNFT, FlavorLegacy} {
		t.Run(string(f), func(t *testing.T) {
			requireFlavour(t, f)
			_, path := testutil.NewNetNS(t)
			b := New(Options{NodeName: "node-1", NetNSPath: path, Flavor: f, LockFile: filepath.Join(t.TempDir(), "xtables.lock")})
			ctx := context.Background()

			st := twoServices()
			res, err := b.Sync(ctx, st)
			require.NoError(t, err)
			assert.True(t, res.Full)
			nat := save(t, path, f, "nat")
			for _, want := range []string{
				`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
				`-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
				`-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`,
				":" + ServiceChain(st.Services[0].Name), ":" + ServiceChain(st.Services[1].Name),
				"--probability 0.50000000000 -j KUBE-SEP-",
				`-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
			} {
				assert.Contains(t, nat, want)
			}
			assert.Contains(t, save(t, path, f, "filter"), `-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`)
			assert.Contains(t, save(t, path, f, "mangle"), ":"+ChainCanary)

			// Partial: change b; a's chains stay as they were, b's stale endpoint goes.
			a := st.Services[0]
			aChains := []string{ServiceChain(a.Name), EndpointChain(a.Name, a.Endpoints[0]), EndpointChain(a.Name, a.Endpoints[1])}
			before := map[string][]string{}
			for _, c := range aChains {
				before[c] = chainRules(nat, c)
				require.NotEmpty(t, before[c], c)
			}
			st2 := twoServices()
			st2.Services[1].Endpoints = bt.EPs(1, 1, 9090, 0)
			res, err = b.Sync(ctx, st2)
			require.NoError(t, err)
			assert.False(t, res.Full)
			assert.Equal(t, 1, res.ChangedServices)
			nat2 := save(t, path, f, "nat")
			for _, c := range aChains {
				assert.Equal(t, before[c], chainRules(nat2, c))
			}
			stale := EndpointChain(st2.Services[1].Name, bt.EPs(1, 2, 9090, 0)[1])
			assert.Contains(t, nat, ":"+stale)
			assert.NotContains(t, nat2, ":"+stale)
			assert.Len(t, chainRules(nat2, ServiceChain(st2.Services[1].Name)), 2) // masq + one endpoint

			// A state the kernel refuses (an IPv6 ClusterIP in the IPv4 table).
			bad := twoServices()
			bad.Services[1].ClusterIP = netip.MustParseAddr("fd00::1")
			_, err = b.Sync(ctx, bad)
			require.Error(t, err)
			var re *RestoreError
			require.ErrorAs(t, err, &re)
			assert.Contains(t, err.Error(), "sync node-1 "+b.Name()+": restore line ")
			assert.Contains(t, re.Context, "> ")
			assert.Contains(t, re.Context, "fd00::1")
			assert.Equal(t, 5, strings.Count(re.Context, "\n")+1)
			assert.Equal(t, 1, b.RestoreFailures())
			res, err = b.Sync(ctx, st2)
			require.NoError(t, err)
			assert.True(t, res.Full, "after a failure the sync is full")

			// Canary gone: full sync.
			require.NoError(t, ipt(t, path, f, "-t", "mangle", "-X", ChainCanary))
			res, err = b.Sync(ctx, st2)
			require.NoError(t, err)
			assert.True(t, res.Full)
			assert.Contains(t, save(t, path, f, "mangle"), ":"+ChainCanary)
			res, err = b.Sync(ctx, st2)
			require.NoError(t, err)
			assert.False(t, res.Full)

			// Jumps are not duplicated by repeated full syncs.
			b.ForceFullSync()
			_, err = b.Sync(ctx, st2)
			require.NoError(t, err)
			assert.Equal(t, 1, strings.Count(save(t, path, f, "nat"), "-A PREROUTING -m comment --comment \"kubernetes service portals\""))

			require.NoError(t, b.Cleanup(ctx))
			for _, table := range []string{"filter", "nat", "mangle"} {
				assert.NotContains(t, save(t, path, f, table), "KUBE-", table)
			}
		})
	}
}

// dumpFlows lists the conntrack table of the namespace.
func dumpFlows(t *testing.T, path string) []conntrack.Flow {
	t.Helper()
	var flows []conntrack.Flow
	require.NoError(t, netns.Do(path, func() error {
		c, err := conntrack.Dial(nil)
		if err != nil {
			return err
		}
		defer c.Close()
		flows, err = c.Dump(nil)
		return err
	}))
	return flows
}

func TestPrivilegedConntrackCleanup(t *testing.T) {
	requireFlavour(t, FlavorNFT)
	_, path := testutil.NewNetNS(t)
	h, err := vnetns.GetFromPath(path)
	require.NoError(t, err)
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	require.NoError(t, err)
	defer nl.Close()
	// Endpoint addresses on the namespace's own loopback, and a route for the service range.
	link, err := nl.LinkByName("lo")
	require.NoError(t, err)
	for _, a := range []string{"10.1.0.2/32", "10.1.0.3/32"} {
		addr, err := netlink.ParseAddr(a)
		require.NoError(t, err)
		require.NoError(t, nl.AddrAdd(link, addr))
	}
	_, svcNet, _ := net.ParseCIDR("172.30.0.0/16")
	require.NoError(t, nl.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: svcNet}))

	ep := func(ip string) backends.Endpoint {
		return backends.Endpoint{IP: netip.MustParseAddr(ip), Port: 5353, Ready: true, Serving: true}
	}
	udp := func(endpoints ...backends.Endpoint) *backends.State {
		return bt.State(bt.Service("ns1/dns:p53/udp", "172.30.0.10:53", endpoints...))
	}
	b := New(Options{NodeName: "node-1", NetNSPath: path, LockFile: filepath.Join(t.TempDir(), "lock")})
	ctx := context.Background()
	_, err = b.Sync(ctx, udp(ep("10.1.0.2")))
	require.NoError(t, err)

	// A UDP packet to the ClusterIP, sent inside the test namespace only.
	require.NoError(t, bt.SendUDP(path, "172.30.0.10:53", []byte("ping")))
	toService := func() int {
		n := 0
		for _, f := range dumpFlows(t, path) {
			if f.TupleOrig.IP.DestinationAddress == netip.MustParseAddr("172.30.0.10") && f.TupleOrig.Proto.DestinationPort == 53 {
				assert.Equal(t, netip.MustParseAddr("10.1.0.2"), f.TupleReply.IP.SourceAddress)
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, toService(), "the packet created a DNATed entry")

	_, err = b.Sync(ctx, udp(ep("10.1.0.3")))
	require.NoError(t, err)
	assert.Equal(t, 0, toService(), "the entry of the removed endpoint is deleted")
}
