//go:build linux

package kubeproxy

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
)

// TestProcessLifecycle: kube-proxy starts inside the node's namespace (its metrics server
// answers on the namespace's loopback only, not the host's), a Sync without an API server
// fails within its bound with the log tail, and Close stops the process. No API server is
// needed: kube-proxy serves /metrics before its informers have synced.
func TestProcessLifecycle(t *testing.T) {
	testutil.RequireRoot(t)
	bin := upstreamtest.Require(t, upstream.KubeProxy)[upstream.KubeProxy]
	_, nsPath := testutil.NewNetNS(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	b, err := New(Options{
		Binary: bin, NetNSPath: nsPath, StateDir: dir, SyncTimeout: 3 * time.Second,
		Config: Config{Mode: ModeIPTables, NodeName: "node-0", NodeIP: netip.MustParseAddr("127.0.0.1"), Kubeconfig: kubeconfig},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = b.Sync(ctx, nil)
	require.Error(t, err, "no API server: kube-proxy cannot sync")
	assert.Contains(t, err.Error(), "not synced after")
	require.NotNil(t, b.proc)
	pid := b.proc.cmd.Process.Pid

	// Its metrics are served inside the namespace.
	var s Samples
	require.Eventually(t, func() bool { s, err = b.Scrape(ctx); return err == nil }, 10*time.Second, 50*time.Millisecond, "scrape: %v", err)
	assert.True(t, s.Has(MetricSyncDuration+"_count"))
	assert.Zero(t, s[MetricSyncDuration+"_count"])

	require.NoError(t, b.Close(ctx))
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "kube-proxy still running")
	log, err := os.ReadFile(b.LogPath())
	require.NoError(t, err)
	assert.NotEmpty(t, log)
}
