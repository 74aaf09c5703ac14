//go:build linux

package kubeproxy

import (
	"context"
	"fmt"
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

// TestProcessLifecycle: kube-proxy starts inside the node's namespace, a Sync without an
// API server fails within its bound with the log tail (v1.37 serves /metrics only once it
// has read its Node object), and Close stops the process.
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
	pid := b.proc.Pid()

	// It runs inside the node's namespace.
	var want, got syscall.Stat_t
	require.NoError(t, syscall.Stat(nsPath, &want))
	require.NoError(t, syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &got))
	assert.Equal(t, want.Ino, got.Ino, "kube-proxy is not in the node's namespace")
	assert.Contains(t, err.Error(), "kube-proxy-node-0.log", "the error names the log")

	require.NoError(t, b.Close(ctx))
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "kube-proxy still running")
	log, err := os.ReadFile(b.LogPath())
	require.NoError(t, err)
	assert.NotEmpty(t, log)
}
