package nftables

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/knftables"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
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

const testNode = bt.Node

// nEndpoints returns n ready endpoints 10.1.x.y:8080, the first local.
func nEndpoints(n int) []backends.Endpoint { return bt.EPs(0, n, 8080, 1) }

// state returns the desired state of testNode (backendstest.Node) with this package's node
// settings.
func state(svcs ...*backends.ServicePort) *backends.State {
	s := bt.State(svcs...)
	s.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.0.10")}
	s.ClusterCIDR = netip.MustParsePrefix("10.1.0.0/16")
	s.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
	return s
}

// bigState returns n services ns/svc-i with perSvc endpoints each.
func bigState(n, perSvc int) *backends.State {
	svcs := make([]*backends.ServicePort, n)
	for i := range svcs {
		eps := make([]backends.Endpoint, perSvc)
		for j := range eps {
			k := i*perSvc + j
			eps[j] = bt.EP(fmt.Sprintf("10.%d.%d.%d:8080", 64+k/62500, (k%62500)/250, k%250+1), bt.LocalIf(j == 0))
		}
		svcs[i] = bt.Service(fmt.Sprintf("bench/svc-%d:p80", i), fmt.Sprintf("172.%d.%d.%d:80", 16+i/62500, (i%62500)/250, i%250+1), eps...)
	}
	return state(svcs...)
}

// sortedLines returns the lines of s sorted: dumps of equal tables differ in element order.
func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return lines
}

// ifaceKernel adapts a knftables.Interface that needs no namespace handling: the fake of
// the tests that run without root.
type ifaceKernel struct{ nft knftables.Interface }

func (k ifaceKernel) run(ctx context.Context, tx *knftables.Transaction) error {
	return k.nft.Run(ctx, tx)
}

func (k ifaceKernel) list(ctx context.Context, objectType string) ([]string, error) {
	return k.nft.List(ctx, objectType)
}

func (k ifaceKernel) tableExists(ctx context.Context) (bool, error) {
	_, err := k.nft.List(ctx, "maps")
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
