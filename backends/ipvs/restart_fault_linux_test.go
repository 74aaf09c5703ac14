//go:build linux

package ipvs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	mipvs "github.com/moby/ipvs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
)

// ipvsOld and ipvsNew are a node's state before and after a restart: one service loses an
// endpoint, one goes away, one appears.
func ipvsOld() *backends.State {
	return state(
		bt.Service("ns/a:p", "10.96.0.10:80", bt.EP("10.244.1.2:8080"), bt.EP("10.244.1.3:8080")),
		bt.Service("ns/b:p", "10.96.0.11:80", bt.EP("10.244.2.2:8080", bt.Local)),
		bt.Service("ns/c:p/udp", "10.96.0.12:53", bt.EP("10.244.3.2:53"), bt.EP("10.244.3.3:53")),
	)
}

func ipvsNew() *backends.State {
	return state(
		bt.Service("ns/a:p", "10.96.0.10:80", bt.EP("10.244.1.3:8080")),
		bt.Service("ns/b:p", "10.96.0.11:80", bt.EP("10.244.2.2:8080", bt.Local)),
		bt.Service("ns/d:p", "10.96.0.13:443", bt.EP("10.244.4.2:8443"), bt.EP("10.244.4.3:8443")),
	)
}

// ipvsKernel is the node's IPVS state as the restart test compares it: virtual and real
// servers, kube-ipvs0's addresses and the ipsets (without their random hash seeds), sorted.
func ipvsKernel(t *testing.T, path string) string {
	t.Helper()
	addrs := dummyAddrs(t, path)
	slices.Sort(addrs)
	out, err := netns.Exec(context.Background(), path, netns.Command{Path: "ipset", Args: []string{"save"}})
	require.NoError(t, err)
	sets := strings.Split(strings.TrimSpace(string(out.Stdout)), "\n")
	for i, l := range sets {
		if j := strings.Index(l, " initval "); j > 0 {
			sets[i] = l[:j] // a random hash seed per set
		}
	}
	slices.Sort(sets)
	return strings.Join(kernelModel(t, path), "\n") + "\n--- kube-ipvs0\n" + strings.Join(addrs, "\n") +
		"\n--- ipsets\n" + strings.Join(sets, "\n")
}

// TestRestartFirstSyncEqualsFreshSync (IPVS, in the microVM): a new backend on a node that
// holds the old backend's state syncs the new state once; the kernel then holds exactly
// what a fresh backend's first sync writes into an empty namespace.
func TestRestartFirstSyncEqualsFreshSync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old, path := kernelBackend(t, Options{})
	_, err := old.Sync(ctx, ipvsOld())
	require.NoError(t, err)
	before := ipvsKernel(t, path)

	restarted, err := New(Options{NodeName: "node-1", NetNSPath: path})
	require.NoError(t, err)
	t.Cleanup(restarted.Close)
	res, err := restarted.Sync(ctx, ipvsNew())
	require.NoError(t, err)
	assert.True(t, res.Full)

	fresh, freshPath := kernelBackend(t, Options{})
	_, err = fresh.Sync(ctx, ipvsNew())
	require.NoError(t, err)
	want := ipvsKernel(t, freshPath)
	assert.NotEqual(t, before, want, "the two states must differ, or the test proves nothing")
	assert.Equal(t, want, ipvsKernel(t, path))
}

// TestFaultIPVSTampering (in the microVM): virtual servers deleted or the whole table
// flushed behind the backend's back are noticed by CheckState; the next sync is full and
// puts back exactly what was there.
func TestFaultIPVSTampering(t *testing.T) {
	tampers := []struct {
		name string
		do   func(t *testing.T, h *mipvs.Handle)
	}{
		{"delete one virtual server", func(t *testing.T, h *mipvs.Handle) {
			svcs, err := h.GetServices()
			require.NoError(t, err)
			require.NotEmpty(t, svcs)
			require.NoError(t, h.DelService(svcs[0]))
		}},
		{"flush the table", func(t *testing.T, h *mipvs.Handle) {
			require.NoError(t, h.Flush())
		}},
	}
	for _, tt := range tampers {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			b, path := kernelBackend(t, Options{})
			require.NoError(t, b.CheckState(ctx), "nothing to check before the first sync")
			_, err := b.Sync(ctx, ipvsNew())
			require.NoError(t, err)
			require.NoError(t, b.CheckState(ctx), "intact after a sync")
			want := ipvsKernel(t, path)

			h, err := mipvs.New(path)
			require.NoError(t, err)
			tt.do(t, h)
			h.Close()
			err = b.CheckState(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "gone from the IPVS table")

			res, err := b.Sync(ctx, ipvsNew())
			require.NoError(t, err)
			assert.True(t, res.Full, "a lost state makes the next sync full")
			assert.Equal(t, want, ipvsKernel(t, path))
			assert.NoError(t, b.CheckState(ctx))
		})
	}
}
