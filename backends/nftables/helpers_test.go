package nftables

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), got, "golden file %s differs (run with -update after checking)", path)
}

const testNode = "node-1"

// ep returns a ready endpoint; local ones are on testNode.
func ep(ip string, port int32, local bool) backends.Endpoint {
	e := backends.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true, NodeName: "node-2", IsLocal: local}
	if local {
		e.NodeName = testNode
	}
	return e
}

// svc returns a TCP ClusterIP service port ns/name:p<port> with eps.
func svc(ns, name, clusterIP string, port int32, eps ...backends.Endpoint) *backends.ServicePort {
	backends.SortEndpoints(eps)
	return &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: ns, Name: name, Port: fmt.Sprintf("p%d", port), Protocol: backends.TCP},
		ClusterIP: netip.MustParseAddr(clusterIP),
		Port:      port,
		Endpoints: eps,
	}
}

// nEndpoints returns n ready endpoints 10.1.x.y:8080, the first local.
func nEndpoints(n int) []backends.Endpoint {
	eps := make([]backends.Endpoint, n)
	for i := range eps {
		eps[i] = ep(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), 8080, i == 0)
	}
	return eps
}

// state returns the desired state of testNode with the usual node settings.
func state(svcs ...*backends.ServicePort) *backends.State {
	s := &backends.State{
		NodeName:     testNode,
		NodeIPs:      []netip.Addr{netip.MustParseAddr("192.168.0.10")},
		ClusterCIDR:  netip.MustParsePrefix("10.1.0.0/16"),
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		Services:     svcs,
	}
	s.SortServices()
	return s
}

// bigState returns n services ns/svc-i with perSvc endpoints each.
func bigState(n, perSvc int) *backends.State {
	svcs := make([]*backends.ServicePort, n)
	for i := range svcs {
		eps := make([]backends.Endpoint, perSvc)
		for j := range eps {
			k := i*perSvc + j
			eps[j] = ep(fmt.Sprintf("10.%d.%d.%d", 64+k/62500, (k%62500)/250, k%250+1), 8080, j == 0)
		}
		svcs[i] = svc("bench", fmt.Sprintf("svc-%d", i), fmt.Sprintf("172.%d.%d.%d", 16+i/62500, (i%62500)/250, i%250+1), 80, eps...)
	}
	return state(svcs...)
}

// sortedLines returns the lines of s sorted: dumps of equal tables differ in element order.
func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return lines
}
