//go:build linux

package agent

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab/probe"
)

// TestHealthServersInNamespace opens the health servers inside a throwaway namespace and
// queries them from inside it: the proxier's /healthz and a service's 200, then 503.
func TestHealthServersInNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	_, nsPath := testutil.NewNetNS(t)
	require.NoError(t, netns.LoopbackUp(nsPath))

	be := newFakeBackend()
	a := newAgent(be, time.Now, 0, time.Hour)
	require.NoError(t, a.ServeHealth(t.Context(), NetNSListen(nsPath), 0))
	t.Cleanup(func() { assert.NoError(t, a.CloseHealth()) })
	ctx := runAgent(t, a)

	pr, err := probe.New(nsPath, probe.WithWorkers(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = pr.Close() })
	client := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: pr.DialContext, DisableKeepAlives: true}}
	status := func(url string) int {
		resp, err := client.Get(url)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}

	node := "node-a"
	local := bt.SliceObject("lb-1", "lb", "http", 8080, time.Time{}, "10.244.0.2")
	local.Endpoints[0].NodeName = &node
	a.Observe(Change{Service: lbService("lb", "10.96.0.10", 32100), ResourceVersion: 1})
	a.Observe(Change{Slice: local, ResourceVersion: 2})
	require.NoError(t, a.WaitSynced(ctx, 2))
	require.NoError(t, a.HealthErr())
	assert.Equal(t, http.StatusOK, status("http://127.0.0.1:10256/healthz"))
	assert.Equal(t, http.StatusOK, status("http://127.0.0.1:32100/"))

	a.Observe(Change{Slice: bt.SliceObject("lb-1", "lb", "http", 8080, time.Time{}), ResourceVersion: 3})
	require.NoError(t, a.WaitSynced(ctx, 3))
	assert.Equal(t, http.StatusServiceUnavailable, status("http://127.0.0.1:32100/"))

}
