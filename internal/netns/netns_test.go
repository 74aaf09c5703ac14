//go:build linux

package netns_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// TestDeleteAfterIproute2 reproduces the leak that left an undeletable namespace on the
// bench machine: a namespace created by us, then `ip netns add` (which bind-mounts
// /run/netns over itself unless it is a mount point already), then Delete. The namespace
// must be gone, mount and file.
func TestDeleteAfterIproute2(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "ip")
	ours := fmt.Sprintf("%s%d-%s", netns.TestPrefix, os.Getpid(), testutil.RandomID(t, 6))
	theirs := ours + "ip"
	_, err := netns.Create(ours)
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Delete(ours); _ = netns.Delete(theirs) })

	require.NoError(t, exec.Command("ip", "netns", "add", theirs).Run())
	require.NoError(t, netns.Delete(ours))
	require.NoError(t, exec.Command("ip", "netns", "delete", theirs).Run())

	_, err = os.Stat(netns.Path(ours))
	assert.ErrorIs(t, err, os.ErrNotExist)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(mounts), ours), "a mount of the deleted namespace is left")
}

// TestGuardRefusesOnTheStartNamespace: the test's own thread is in the namespace the
// process started in, where sends must be refused.
func TestGuardRefusesOnTheStartNamespace(t *testing.T) {
	assert.ErrorIs(t, netns.Guard(), netns.ErrRootNamespace)
}

// TestStoppedWorkersLeaveNoThreadInside: once Stop returns, no thread of the process is in
// the worker's namespace any more (the main thread, parked when it exits locked, would stay
// there for the process's life).
func TestStoppedWorkersLeaveNoThreadInside(t *testing.T) {
	_, path := testutil.NewNetNS(t)
	target, err := os.Readlink(path)
	if err != nil || !strings.HasPrefix(target, "net:") { // a bind mount reads as a file
		fi, err := os.Stat(path)
		require.NoError(t, err)
		target = fmt.Sprintf("net:[%d]", fi.Sys().(*syscall.Stat_t).Ino)
	}
	inside := func() []string {
		tasks, err := os.ReadDir("/proc/self/task")
		require.NoError(t, err)
		var out []string
		for _, task := range tasks {
			if ns, err := os.Readlink(filepath.Join("/proc/self/task", task.Name(), "ns", "net")); err == nil && ns == target {
				out = append(out, task.Name())
			}
		}
		return out
	}
	var workers []*netns.Worker
	for range 16 {
		w, err := netns.StartWorker(path)
		require.NoError(t, err)
		workers = append(workers, w)
	}
	require.Len(t, inside(), 16, "every worker's thread is in the namespace while it runs")
	for _, w := range workers {
		w.Stop()
	}
	assert.Empty(t, inside(), "threads left in the namespace after Stop")
}

// TestWorkerDial: a worker's Dial, and Dial, reach a listener that exists only inside its namespace.
func TestWorkerDial(t *testing.T) {
	_, path := testutil.NewNetNS(t)
	require.NoError(t, netns.LoopbackUp(path))
	var ln net.Listener
	require.NoError(t, netns.Do(path, func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}))
	defer ln.Close()
	w, err := netns.StartWorker(path)
	require.NoError(t, err)
	defer w.Stop()
	c, err := w.Dial(context.Background(), &net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, c.Close())
	c, err = netns.Dial(context.Background(), path, &net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, c.Close())
}
