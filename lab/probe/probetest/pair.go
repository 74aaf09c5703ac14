//go:build linux

// Package probetest builds the smallest lab for traffic tests: two throwaway network
// namespaces joined by a veth pair. It is a test helper (like net/http/httptest) and needs
// root; the namespaces and the veth pair are removed when the test ends.
package probetest

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"kpbench.dev/kpbench/internal/testutil"
)

// Host is one end of a Pair.
type Host struct {
	// Name is the namespace name (`ip netns` name).
	Name string
	// Path is the namespace path, for netns.Do, echo.Serve and probe.New.
	Path string
	// Link is the name of the host's veth end.
	Link string
	// Addr is the host's address on the veth.
	Addr netip.Addr
}

// Pair is two namespaces A and B on one /24: A has 10.0.0.1, B has 10.0.0.2.
type Pair struct {
	// A and B are the two ends.
	A, B Host
	// Subnet is the /24 both ends are on.
	Subnet netip.Prefix
	// Silent is an address on the subnet that nobody has: packets to it are never answered
	// (neighbour resolution fails).
	Silent netip.Addr
	// NoRoute is an address neither end has a route to.
	NoRoute netip.Addr
}

// NewPair makes two namespaces (testutil.NewNetNS) and joins them with a veth pair created
// directly inside them, through netlink handles bound to the namespaces: nothing is created
// in the host's root namespace.
//
// Equivalent to:
//
//	ip -n $A link add $la type veth peer name $lb netns $B
//	ip -n $A addr add 10.0.0.1/24 dev $la; ip -n $A link set $la up
//	ip -n $B addr add 10.0.0.2/24 dev $lb; ip -n $B link set $lb up
func NewPair(t testing.TB) Pair {
	t.Helper()
	testutil.RequireRoot(t)
	id := testutil.RandomID(t, 6)
	p := Pair{
		Subnet:  netip.MustParsePrefix("10.0.0.0/24"),
		Silent:  netip.MustParseAddr("10.0.0.3"),
		NoRoute: netip.MustParseAddr("10.99.0.1"),
	}
	p.A.Name, p.A.Path = testutil.NewNetNS(t)
	p.B.Name, p.B.Path = testutil.NewNetNS(t)
	p.A.Link, p.B.Link = "kpbva"+id, "kpbvb"+id
	p.A.Addr, p.B.Addr = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")

	ha, err := vnetns.GetFromPath(p.A.Path)
	require.NoError(t, err)
	defer ha.Close()
	hb, err := vnetns.GetFromPath(p.B.Path)
	require.NoError(t, err)
	defer hb.Close()
	nla, err := netlink.NewHandleAt(ha)
	require.NoError(t, err)
	defer nla.Close()
	nlb, err := netlink.NewHandleAt(hb)
	require.NoError(t, err)
	defer nlb.Close()

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: p.A.Link},
		PeerName:      p.B.Link,
		PeerNamespace: netlink.NsFd(int(hb)),
	}
	require.NoError(t, nla.LinkAdd(veth), "veth %s/%s", p.A.Link, p.B.Link)
	for _, end := range []struct {
		nl   *netlink.Handle
		host Host
	}{{nla, p.A}, {nlb, p.B}} {
		link, err := end.nl.LinkByName(end.host.Link)
		require.NoError(t, err)
		ipnet := &net.IPNet{IP: end.host.Addr.AsSlice(), Mask: net.CIDRMask(p.Subnet.Bits(), 32)}
		require.NoError(t, end.nl.AddrAdd(link, &netlink.Addr{IPNet: ipnet}), "addr %s on %s", ipnet, end.host.Name)
		require.NoError(t, end.nl.LinkSetUp(link), "up %s in %s", end.host.Link, end.host.Name)
	}
	// Until the kernel's linkwatch work has seen the carrier (up to a second after "up"),
	// the device has no queue discipline and drops every packet: the first probes would
	// time out. The work sets the operational state and the queue in one go.
	for _, end := range []struct {
		nl   *netlink.Handle
		host Host
	}{{nla, p.A}, {nlb, p.B}} {
		require.Eventually(t, func() bool {
			link, err := end.nl.LinkByName(end.host.Link)
			return err == nil && link.Attrs().OperState == netlink.OperUp
		}, 5*time.Second, 5*time.Millisecond, "%s in %s never became operationally up", end.host.Link, end.host.Name)
	}
	return p
}

// LinkExists reports whether the host's veth end still exists in its namespace. When one
// namespace of the pair is freed by the kernel, both veth ends disappear, so this tells
// whether the other namespace is really gone (nothing holds it any more).
func LinkExists(t testing.TB, h Host) bool {
	t.Helper()
	ns, err := vnetns.GetFromPath(h.Path)
	require.NoError(t, err)
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns)
	require.NoError(t, err)
	defer nl.Close()
	_, err = nl.LinkByName(h.Link)
	if _, ok := err.(netlink.LinkNotFoundError); ok {
		return false
	}
	require.NoError(t, err)
	return true
}
