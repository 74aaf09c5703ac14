package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

var errCanaryGone = errors.New("canary gone")

// checkingBackend is a fakeBackend with a state check that fails while lost is set; a
// full sync repairs the state (clears lost). Every check is counted.
type checkingBackend struct {
	*fakeBackend
	mu     sync.Mutex
	lost   bool
	checks int
	// checked, when set, receives for every check whether the backend's last sync failed.
	checked chan bool
}

func (c *checkingBackend) CheckState(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks++
	if c.checked != nil {
		c.fakeBackend.mu.Lock()
		errored := c.fakeBackend.errored
		c.fakeBackend.mu.Unlock()
		select {
		case c.checked <- errored:
		default:
		}
	}
	if c.lost {
		return errCanaryGone
	}
	return nil
}

func (c *checkingBackend) Sync(ctx context.Context, st *backends.State) (backends.SyncResult, error) {
	res, err := c.fakeBackend.Sync(ctx, st)
	if err == nil && res.Full {
		c.mu.Lock()
		c.lost = false
		c.mu.Unlock()
	}
	return res, err
}

func (c *checkingBackend) lose() {
	c.mu.Lock()
	c.lost = true
	c.mu.Unlock()
}

// wrapping hides its backend's optional interfaces except through Unwrap, like
// backends/conntrack's UDP cleanup wrapper.
type wrapping struct{ backends.Backend }

func (w wrapping) Unwrap() backends.Backend { return w.Backend }

// waitCall waits for the next sync the backend receives.
func waitCall(t *testing.T, ctx context.Context, be *fakeBackend) fakeCall {
	t.Helper()
	select {
	case c := <-be.calls:
		return c
	case <-ctx.Done():
		require.FailNow(t, "no sync before the deadline")
		return fakeCall{}
	}
}

// TestStateLostRepairedWithinCheckPeriod: with a SyncPeriod far longer than the test, a
// state check finds the rules gone; the agent forces a full sync at once, records the cause
// and counts it. Directly and through a wrapper.
func TestStateLostRepairedWithinCheckPeriod(t *testing.T) {
	tests := []struct {
		name string
		wrap bool
	}{{"direct", false}, {"through Unwrap", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb := &checkingBackend{fakeBackend: newFakeBackend()}
			var be backends.Backend = cb
			if tt.wrap {
				be = wrapping{cb}
			}
			a := New(Config{
				Node:        backends.NodeView{Name: "node-a", IPs: nodeIPs("10.0.0.1")},
				Backend:     be,
				SyncPeriod:  time.Hour,
				CheckPeriod: 20 * time.Millisecond,
			})
			a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
			ctx := runAgent(t, a)
			first := waitCall(t, ctx, cb.fakeBackend)
			require.NoError(t, first.Err)

			lostAt := time.Now()
			cb.lose()
			// The forced full sync reaches the backend, through the wrapper's Unwrap (the
			// wrapper has no ForceFullSync of its own).
			c := waitCall(t, ctx, cb.fakeBackend)
			repairedIn := time.Since(lostAt)
			assert.True(t, c.Full, "the sync after a lost state must be full")
			assert.Less(t, repairedIn, time.Second, "repaired within a few check periods, not a SyncPeriod")

			recs := a.Records()
			require.Len(t, recs, 2)
			assert.ErrorIs(t, recs[1].StateLost, errCanaryGone)
			assert.ErrorContains(t, recs[1].StateLost, "state check node-a fake")
			assert.False(t, recs[1].Periodic)
			assert.Equal(t, 1, a.Metrics().StateLost)
			assert.NoError(t, a.CheckState(ctx), "repaired")
		})
	}
}

// TestStateCheckNotAfterFailedSync: while the last sync failed the check does not run (the
// retry is full anyway); once a sync succeeds it runs again.
func TestStateCheckNotAfterFailedSync(t *testing.T) {
	cb := &checkingBackend{fakeBackend: newFakeBackend(), checked: make(chan bool, 100)}
	cb.failSyncs(3)
	a := New(Config{
		Node:        backends.NodeView{Name: "node-a"},
		Backend:     cb,
		SyncPeriod:  time.Hour,
		CheckPeriod: 5 * time.Millisecond,
	})
	ctx := runAgent(t, a)
	for range 4 { // three failures (retried every 100ms), then a success
		waitCall(t, ctx, cb.fakeBackend)
	}
	select {
	case afterError := <-cb.checked:
		assert.False(t, afterError, "a check ran while the last sync had failed")
	case <-ctx.Done():
		require.FailNow(t, "no state check after the successful sync")
	}
	recs := a.Records()
	require.Len(t, recs, 4)
	assert.Error(t, recs[2].Err)
	assert.NoError(t, recs[3].Err)
}
