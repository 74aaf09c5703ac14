//go:build linux

package nftables

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"sigs.k8s.io/knftables"

	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// kernelBackend returns a Backend on a throwaway namespace, removed after the test.
func kernelBackend(t testing.TB) (*Backend, string) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "nft")
	_, path := testutil.NewNetNS(t)
	b, err := New(Options{NodeName: testNode, NetNSPath: path})
	require.NoError(t, err)
	return b, path
}

// kernelNFT returns a knftables interface on the host's nft inside the namespace at path,
// to read back what the backend wrote (the backend runs nft itself: see nsKernel).
func kernelNFT(t testing.TB, path string) knftables.Interface {
	t.Helper()
	var nft knftables.Interface
	require.NoError(t, netns.Do(path, func() error {
		var err error
		nft, err = knftables.New(knftables.IPv4Family, Table)
		return err
	}))
	return nft
}

// nft runs nft with args inside the namespace at path.
func nft(t testing.TB, path string, args ...string) (string, error) {
	t.Helper()
	res, err := netns.Exec(context.Background(), path, netns.Command{Path: "nft", Args: args})
	return string(res.Stdout), err
}

func listTable(t testing.TB, path string) string {
	t.Helper()
	out, err := nft(t, path, "list", "table", "ip", Table)
	require.NoError(t, err)
	return out
}

func TestNewRequiresNamespace(t *testing.T) {
	_, err := New(Options{NodeName: testNode})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NetNSPath")
}

func TestKernelSync(t *testing.T) {
	b, path := kernelBackend(t)
	ctx := context.Background()
	s := incrementalStart()
	s.Services[2].AffinityClientIP, s.Services[2].AffinityTimeoutSeconds = true, 100

	res, err := b.Sync(ctx, s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Positive(t, res.Apply)
	out := listTable(t, path)
	assert.Contains(t, out, "table ip kube-proxy")
	assert.Contains(t, out, "map service-ips")
	assert.Contains(t, out, "172.30.0.42 . tcp . 80 : goto service-T3BAHBOQ-ns1/svc-b/tcp/p80")
	assert.Contains(t, out, "dnat to 10.1.0.4:8080")
	assert.Contains(t, out, "flags dynamic,timeout")

	// Every kind of incremental change, checked against the kernel: the transactions
	// (with immediate deletion of chains whose last reference goes in the same
	// transaction, and recreated affinity sets) must be accepted.
	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			m.mutate(s)
			res, err := b.Sync(ctx, s)
			require.NoError(t, err)
			assert.False(t, res.Full)
			ref, refFake := newFake()
			_, err = ref.Sync(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, objects(t, refFake, nil), objects(t, kernelNFT(t, path), &path), "kernel differs from a full sync of the same state")
		})
	}
	out = listTable(t, path)
	assert.NotContains(t, out, "/svc-b/", "removed service left chains or elements")
	assert.NotContains(t, out, "affinity-", "affinity sets left after disabling affinity")
}

// objects lists the chains, sets and the elements of the service maps that nft holds,
// sorted; with path set, inside that namespace.
func objects(t *testing.T, nft knftables.Interface, path *string) []string {
	t.Helper()
	var out []string
	collect := func() error {
		for _, typ := range []string{"chain", "set", "map"} {
			names, err := nft.List(context.Background(), typ)
			if err != nil {
				return err
			}
			for _, n := range names {
				out = append(out, typ+" "+n)
			}
		}
		for _, m := range []string{serviceIPsMap, noEndpointServicesMap, serviceNodePortsMap, noEndpointNodePortsMap, firewallIPsMap} {
			elems, err := nft.ListElements(context.Background(), "map", m)
			if err != nil {
				return err
			}
			for _, e := range elems {
				out = append(out, m+" "+strings.Join(e.Key, " . ")+" : "+strings.Join(e.Value, " "))
			}
		}
		return nil
	}
	if path != nil {
		require.NoError(t, netns.Do(*path, collect))
	} else {
		require.NoError(t, collect())
	}
	slices.Sort(out)
	return out
}

func TestKernelTableDeletedBehindOurBack(t *testing.T) {
	b, path := kernelBackend(t)
	ctx := context.Background()
	s := incrementalStart()
	_, err := b.Sync(ctx, s)
	require.NoError(t, err)
	want := listTable(t, path)

	_, err = nft(t, path, "delete", "table", "ip", Table)
	require.NoError(t, err)
	res, err := b.Sync(ctx, s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Equal(t, want, listTable(t, path))
}

func TestKernelRefusedTransaction(t *testing.T) {
	b, path := kernelBackend(t)
	ctx := context.Background()
	s := incrementalStart()
	_, err := b.Sync(ctx, s)
	require.NoError(t, err)

	// Behind the backend's back, remove an element it will want to delete.
	_, err = nft(t, path, "delete", "element", "ip", Table, serviceIPsMap, "{ 172.30.0.42 . tcp . 80 }")
	require.NoError(t, err)
	s.Services = s.Services[:1]
	res, err := b.Sync(ctx, s)
	require.Error(t, err)
	assert.False(t, res.Full)
	msg := err.Error()
	assert.Contains(t, msg, "sync node-1 nftables")
	assert.Contains(t, msg, "> ", "the failing transaction line is shown")
	assert.Contains(t, msg, "delete element ip kube-proxy service-ips { 172.30.0.42 . tcp . 80 }")

	res, err = b.Sync(ctx, s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	out := listTable(t, path)
	assert.NotContains(t, out, "svc-b")
	assert.Contains(t, out, "svc-a")
}

func TestKernelRestartedBackend(t *testing.T) {
	first, path := kernelBackend(t)
	ctx := context.Background()
	_, err := first.Sync(ctx, incrementalStart())
	require.NoError(t, err)

	// A new process finds the old table: base chains recreated, stale chains removed.
	second, err := New(Options{NodeName: testNode, NetNSPath: path})
	require.NoError(t, err)
	s := state(bt.Service("ns1/svc-a:p80", "172.30.0.41:80", bt.EP("10.1.0.2:8080")))
	res, err := second.Sync(ctx, s)
	require.NoError(t, err)
	assert.True(t, res.Full)
	out := listTable(t, path)
	assert.NotContains(t, out, "svc-b")
	assert.NotContains(t, out, "10.1.0.3")
	assert.Contains(t, out, "svc-a")
}

func TestKernelCleanup(t *testing.T) {
	b, path := kernelBackend(t)
	ctx := context.Background()
	_, err := b.Sync(ctx, incrementalStart())
	require.NoError(t, err)
	require.NoError(t, b.Cleanup(ctx))
	_, err = nft(t, path, "list", "table", "ip", Table)
	require.Error(t, err, "table still there after Cleanup")
	require.NoError(t, b.Cleanup(ctx), "second Cleanup")
}

// TestKernelTraffic checks that the rules do what they claim: a connection to a
// ClusterIP reaches the endpoint, and one to a service without endpoints is refused at
// once. Client and server share one namespace (the output path).
func TestKernelTraffic(t *testing.T) {
	b, path := kernelBackend(t)
	ctx := context.Background()
	h, err := vnetns.GetFromPath(path)
	require.NoError(t, err)
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	require.NoError(t, err)
	defer nl.Close()
	// A veth pair inside the namespace carries the client address 10.1.0.2 and the route
	// to the service IPs (a route via lo would swallow the ICMP of reject, and this
	// kernel has no dummy links); the server listens on 10.1.0.3 on lo.
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "kpbv0"}, PeerName: "kpbv1"}
	require.NoError(t, nl.LinkAdd(veth))
	peer, err := nl.LinkByName("kpbv1")
	require.NoError(t, err)
	lo, err := nl.LinkByName("lo")
	require.NoError(t, err)
	for _, la := range []struct {
		link netlink.Link
		addr string
	}{{veth, "10.1.0.2/24"}, {lo, "10.1.0.3/32"}} {
		addr, err := netlink.ParseAddr(la.addr)
		require.NoError(t, err)
		require.NoError(t, nl.AddrAdd(la.link, addr))
	}
	require.NoError(t, nl.LinkSetUp(veth))
	require.NoError(t, nl.LinkSetUp(peer))
	_, svcNet, err := net.ParseCIDR("172.30.0.0/16")
	require.NoError(t, err)
	require.NoError(t, nl.RouteAdd(&netlink.Route{LinkIndex: veth.Attrs().Index, Dst: svcNet, Src: net.ParseIP("10.1.0.2")}))

	bt.Serve(t, path, "10.1.0.3:8080", "hello from 10.1.0.3")

	s := state(
		bt.Service("ns1/web:p80", "172.30.0.41:80", bt.EP("10.1.0.3:8080", bt.Local)),
		bt.Service("ns1/empty:p80", "172.30.0.50:80"),
	)
	_, err = b.Sync(ctx, s)
	require.NoError(t, err)

	dial := func(addr string) (string, error) { return bt.Dial(path, addr) }
	got, err := dial("172.30.0.41:80")
	require.NoError(t, err)
	assert.Equal(t, "hello from 10.1.0.3", got)

	start := time.Now()
	_, err = dial("172.30.0.50:80")
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "want connection refused, got %v", err)
	assert.Less(t, time.Since(start), time.Second, "reject must be immediate, not a timeout")

	// An incremental sync moves the service to no endpoints: refused as well.
	s.Services[1].Endpoints = nil // "web" sorts after "empty"
	_, err = b.Sync(ctx, s)
	require.NoError(t, err)
	_, err = dial("172.30.0.41:80")
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "want connection refused, got %v", err)
	assert.True(t, strings.Contains(listTable(t, path), "172.30.0.41 . tcp . 80 comment"))
}
