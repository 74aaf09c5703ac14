//go:build linux

package all

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
)

// TestEveryBackendCanBeForcedFull: the agent's periodic resync and the full-sync
// measurement rely on it; a backend without it silently measures a no-op sync. Each
// backend also has exactly the capabilities its facts declare.
func TestEveryBackendCanBeForcedFull(t *testing.T) {
	_, nsPath := testutil.NewNetNS(t) // some backends probe their tools at construction
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			node := Node{Name: "node-0", NetNSPath: nsPath, StateDir: t.TempDir()}
			if NeedsAPIServer(name) {
				upstreamtest.Require(t, upstream.KubeProxy)
				_, err := New(name, node, Settings{})
				require.ErrorContains(t, err, "reads a real API server", "without a control plane")
				node.Kubeconfig = "/nonexistent/kubeconfig" // read only when kube-proxy starts
			}
			b, err := New(name, node, Settings{})
			if errors.Is(err, ipvs.ErrNoIPVS) && os.Getenv("KPBENCH_REQUIRE_IPVS") != "1" {
				t.Skip("kernel has no IPVS: make test-vm checks ipvs inside the microVM")
			}
			require.NoError(t, err)
			require.Equal(t, name, b.Name())
			_, ok := b.(interface{ ForceFullSync() })
			assert.True(t, ok, "%s has no ForceFullSync", name)
			// The facts say what the backend can do: they must not lie either way.
			f, _ := Lookup(name)
			_, ok = IPVSExperimentsOf(b)
			assert.Equal(t, f.Caps.IPVSExperiments, ok, "IPVSExperiments")
			_, ok = RuleTimerOf(b)
			assert.Equal(t, f.Caps.PerRuleTiming, ok, "PerRuleTiming")
			assert.Equal(t, f.Caps.NeedsAPIServer, NeedsAPIServer(name))
		})
	}
}

func TestUnknownBackend(t *testing.T) {
	_, err := New("bogus", Node{}, Settings{})
	assert.ErrorContains(t, err, "allowed values are")
	assert.NotContains(t, Available(), "iptables-perrule")
}

func TestNeedsAPIServer(t *testing.T) {
	for _, name := range Names() {
		assert.Equal(t, strings.HasPrefix(name, "kube-proxy-"), NeedsAPIServer(name), name)
	}
	for _, name := range []string{"kube-proxy-iptables", "kube-proxy-nftables", "kube-proxy-ipvs"} {
		assert.True(t, Valid(name), name)
		if !HasUpstream() {
			assert.NotContains(t, Available(), name, "not built: not in --backend all")
		}
	}
	if !HasIPVS() {
		assert.NotContains(t, Available(), "kube-proxy-ipvs")
	}
}
