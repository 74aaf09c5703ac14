package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

// errInjected is the error the fake backend returns when told to fail.
var errInjected = errors.New("injected sync failure")

// fakeCall is one Sync the fake backend received.
type fakeCall struct {
	State  *backends.State
	Forced bool // ForceFullSync was called before this sync
	Full   bool
	Err    error
}

// fakeBackend records every State it receives, can be told to fail the next syncs and
// implements ForceFullSync. Every call is also sent (without blocking) on calls, so that
// tests can wait for syncs without sleeping.
type fakeBackend struct {
	calls chan fakeCall
	// onSync, when set, runs inside Sync before it returns (used to race changes with a
	// sync deterministically).
	onSync func()

	mu        sync.Mutex
	received  []fakeCall
	failNext  int
	failWith  error // the error of failed syncs (default errInjected)
	forceNext bool
	forced    int
	errored   bool
	confirm   time.Duration // reported as SyncResult.Confirm
}

func newFakeBackend() *fakeBackend { return &fakeBackend{calls: make(chan fakeCall, 1000)} }

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) Sync(_ context.Context, desired *backends.State) (backends.SyncResult, error) {
	if f.onSync != nil {
		f.onSync()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := fakeCall{State: desired, Forced: f.forceNext}
	c.Full = f.forceNext || f.errored || len(f.received) == 0
	f.forceNext = false
	if f.failNext > 0 {
		f.failNext--
		c.Err = errInjected
		if f.failWith != nil {
			c.Err = f.failWith
		}
	}
	f.errored = c.Err != nil
	f.received = append(f.received, c)
	select {
	case f.calls <- c:
	default:
	}
	if c.Err != nil {
		return backends.SyncResult{}, c.Err
	}
	return backends.SyncResult{Full: c.Full, Rules: 10 * len(desired.Services), Confirm: f.confirm}, nil
}

func (f *fakeBackend) Cleanup(context.Context) error { return nil }

// ForceFullSync makes the next sync full.
func (f *fakeBackend) ForceFullSync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forceNext = true
	f.forced++
}

// failSyncs makes the next n syncs fail.
func (f *fakeBackend) failSyncs(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = n
}

func (f *fakeBackend) syncs() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeCall(nil), f.received...)
}

func (f *fakeBackend) lastState(t *testing.T) *backends.State {
	t.Helper()
	r := f.syncs()
	require.NotEmpty(t, r, "backend never synced")
	return r[len(r)-1].State
}

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func newAgent(be *fakeBackend, clock func() time.Time, minSync, period time.Duration) *Agent {
	return New(Config{
		Node:          backends.NodeView{Name: "node-a", IPs: nodeIPs("10.0.0.1")},
		Backend:       be,
		MinSyncPeriod: minSync,
		SyncPeriod:    period,
		Now:           clock,
	})
}

// runAgent runs a's loop until the test ends and returns a context bounded for the test.
func runAgent(t *testing.T, a *Agent) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	return ctx
}

// cancelled is a context that is already done: WaitSynced with it reports the current state
// without blocking.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func serviceNames(st *backends.State) []string {
	var out []string
	for _, sp := range st.Services {
		out = append(out, sp.Name.Name)
	}
	return out
}

func TestRunFirstSyncAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		before  []Change // observed before Run starts
		waitRV  uint64
		wantSvc []string
	}{
		{name: "empty", waitRV: 0},
		{
			name:    "changes observed before Run",
			before:  []Change{{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1}, {Service: bt.ServiceObject("b", "10.96.0.11", bt.TCPPort("http", 80)), ResourceVersion: 2}},
			waitRV:  2,
			wantSvc: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend()
			// Periods far beyond the test: only the first sync can happen.
			a := newAgent(be, nil, time.Hour, time.Hour)
			for _, c := range tt.before {
				a.Observe(c)
			}
			assert.Nil(t, a.LastState())
			ctx := runAgent(t, a)
			require.NoError(t, a.WaitSynced(ctx, tt.waitRV))
			recs := a.Records()
			require.Len(t, recs, 1)
			assert.NoError(t, recs[0].Err)
			assert.False(t, recs[0].Periodic)
			assert.Equal(t, tt.waitRV, recs[0].ResourceVersion)
			assert.Equal(t, len(tt.wantSvc), recs[0].Services)
			assert.Equal(t, tt.wantSvc, serviceNames(be.lastState(t)))
			assert.Equal(t, be.lastState(t), a.LastState())
		})
	}
}

func TestRunCoalescesBursts(t *testing.T) {
	const minSync = 300 * time.Millisecond
	tests := []struct {
		name    string
		changes int
	}{
		{name: "small burst", changes: 5},
		{name: "large burst", changes: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend()
			a := newAgent(be, nil, minSync, time.Hour)
			ctx := runAgent(t, a)
			require.NoError(t, a.WaitSynced(ctx, 0))
			for i := 1; i <= tt.changes; i++ {
				a.Observe(Change{Service: bt.ServiceObject("svc", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: uint64(i)})
			}
			require.NoError(t, a.WaitSynced(ctx, uint64(tt.changes)))
			recs := a.Records()
			// The first sync, then at most two: one when the first change arrives (if the
			// first sync is already MinSyncPeriod old) and one for the rest.
			assert.LessOrEqual(t, len(recs), 3, "burst of %d changes not coalesced", tt.changes)
			for i := 1; i < len(recs); i++ {
				gap := recs[i].Start.Sub(recs[i-1].Start)
				assert.GreaterOrEqual(t, gap, minSync-20*time.Millisecond, "syncs %d and %d too close", i-1, i)
			}
			assert.Equal(t, tt.changes, a.Metrics().ServiceChanges)
			assert.Equal(t, []string{"svc"}, serviceNames(a.LastState()))
		})
	}
}

func TestRunRetriesFailedSync(t *testing.T) {
	tests := []struct {
		name  string
		fails int
	}{
		{name: "one failure", fails: 1},
		{name: "three failures", fails: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend()
			be.failSyncs(tt.fails)
			a := newAgent(be, nil, 0, time.Hour)
			a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
			ctx := runAgent(t, a)
			require.NoError(t, a.WaitSynced(ctx, 1))

			recs := a.Records()
			require.GreaterOrEqual(t, len(recs), tt.fails+1)
			for i := range tt.fails {
				assert.ErrorIs(t, recs[i].Err, errInjected, "sync %d", i)
			}
			assert.NoError(t, recs[tt.fails].Err, "WaitSynced returned before a successful sync")
			m := a.Metrics()
			assert.Equal(t, tt.fails, m.RestoreFailures)
			assert.NotEmpty(t, m.SyncProxyRules)
			assert.Equal(t, []string{"a"}, serviceNames(a.LastState()))
			calls := be.syncs()
			assert.True(t, calls[tt.fails].Full, "the sync after a failure is full")
		})
	}
}

func TestWaitSyncedNotBeforeSuccess(t *testing.T) {
	be := newFakeBackend()
	a := newAgent(be, nil, 0, 0)
	a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
	be.failSyncs(1)
	rec := a.SyncNow(context.Background())
	require.ErrorIs(t, rec.Err, errInjected)
	assert.Nil(t, a.LastState())

	err := a.WaitSynced(cancelled(), 1)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, errInjected, "the last sync's error is reported")
	assert.Equal(t, 1, a.Metrics().RestoreFailures)

	require.NoError(t, a.SyncNow(context.Background()).Err)
	assert.NoError(t, a.WaitSynced(cancelled(), 1))
	assert.Equal(t, 1, a.Metrics().RestoreFailures)
}

// TestWaitSyncedGivesUpOnMachineLimit: a sync that failed with backends.ErrMachineLimit
// ends a wait at once (no retry can fix it), an ordinary failure does not.
func TestWaitSyncedGivesUpOnMachineLimit(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		giveUp   bool
		contains string
	}{
		{"machine limit", fmt.Errorf("open files: %w", backends.ErrMachineLimit), true, "open files"},
		{"ordinary failure", errInjected, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend()
			be.failWith = tt.err
			a := newAgent(be, nil, 0, 0)
			a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
			be.failSyncs(1)
			require.ErrorIs(t, a.SyncNow(context.Background()).Err, tt.err)
			// With a context already ended, a wait that gives up says so without the
			// context's error; one that waits returns the context's error.
			err := a.WaitSynced(cancelled(), 1)
			require.ErrorIs(t, err, tt.err)
			if tt.giveUp {
				assert.NotErrorIs(t, err, context.Canceled)
				assert.Contains(t, err.Error(), tt.contains)
			} else {
				assert.ErrorIs(t, err, context.Canceled)
			}
		})
	}
}

func TestRunPeriodicSyncIsFull(t *testing.T) {
	be := newFakeBackend()
	a := newAgent(be, nil, 0, 50*time.Millisecond)
	a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
	ctx := runAgent(t, a)
	require.NoError(t, a.WaitSynced(ctx, 1))

	// Wait for a sync the agent forced: no change is pending, so only SyncPeriod causes it.
	var forced fakeCall
	for !forced.Forced {
		select {
		case c := <-be.calls:
			forced = c
		case <-ctx.Done():
			t.Fatal("no periodic sync within the test's deadline")
		}
	}
	assert.True(t, forced.Full)
	assert.NoError(t, forced.Err)
	assert.Equal(t, []string{"a"}, serviceNames(forced.State))

	// The loop serves ForceSync only after the periodic sync ended: its record is stored.
	_, err := a.ForceSync(ctx, false)
	require.NoError(t, err)
	var periodic []SyncRecord
	for _, r := range a.Records() {
		if r.Periodic {
			periodic = append(periodic, r)
		}
	}
	require.NotEmpty(t, periodic)
	assert.True(t, periodic[0].Result.Full)
	assert.False(t, a.Records()[0].Periodic, "the first sync is not periodic")
	assert.NotEmpty(t, a.Metrics().SyncFull)
}

func TestForceSync(t *testing.T) {
	tests := []struct {
		name       string
		full       bool
		wantForced bool
	}{
		{name: "partial", full: false},
		{name: "full", full: true, wantForced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend()
			a := newAgent(be, nil, 0, time.Hour)
			ctx := runAgent(t, a)
			require.NoError(t, a.WaitSynced(ctx, 0))
			a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
			rec, err := a.ForceSync(ctx, tt.full)
			require.NoError(t, err)
			assert.Equal(t, 1, rec.Services)
			calls := be.syncs()
			var forcedCalls int
			for _, c := range calls {
				if c.Forced {
					forcedCalls++
				}
			}
			assert.Equal(t, tt.wantForced, forcedCalls > 0)
		})
	}
}

func TestDeletedObjectsLeaveState(t *testing.T) {
	initial := []Change{
		{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1},
		{Service: bt.ServiceObject("b", "10.96.0.11", bt.TCPPort("http", 80)), ResourceVersion: 2},
		{Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}, "10.244.1.1", "10.244.1.2"), ResourceVersion: 3},
		{Slice: bt.SliceObject("a-2", "a", "http", 8080, time.Time{}, "10.244.2.1"), ResourceVersion: 4},
		{Slice: bt.SliceObject("b-1", "b", "http", 8080, time.Time{}, "10.244.3.1"), ResourceVersion: 5},
	}
	tests := []struct {
		name    string
		deletes []Change
		wantEPs map[string]int // service name -> endpoints in the State
	}{
		{name: "nothing deleted", wantEPs: map[string]int{"a": 3, "b": 1}},
		{
			name:    "service deleted",
			deletes: []Change{{Deleted: true, Service: bt.ServiceObject("b", "10.96.0.11", bt.TCPPort("http", 80)), ResourceVersion: 6}},
			wantEPs: map[string]int{"a": 3},
		},
		{
			name:    "one slice of two deleted",
			deletes: []Change{{Deleted: true, Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}), ResourceVersion: 6}},
			wantEPs: map[string]int{"a": 1, "b": 1},
		},
		{
			name: "every slice deleted",
			deletes: []Change{
				{Deleted: true, Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}), ResourceVersion: 6},
				{Deleted: true, Slice: bt.SliceObject("a-2", "a", "http", 8080, time.Time{}), ResourceVersion: 7},
				{Deleted: true, Slice: bt.SliceObject("b-1", "b", "http", 8080, time.Time{}), ResourceVersion: 8},
			},
			wantEPs: map[string]int{"a": 0, "b": 0},
		},
		{
			name: "everything deleted",
			deletes: []Change{
				{Deleted: true, Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 6},
				{Deleted: true, Service: bt.ServiceObject("b", "10.96.0.11", bt.TCPPort("http", 80)), ResourceVersion: 7},
				{Deleted: true, Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}), ResourceVersion: 8},
				{Deleted: true, Slice: bt.SliceObject("a-2", "a", "http", 8080, time.Time{}), ResourceVersion: 9},
				{Deleted: true, Slice: bt.SliceObject("b-1", "b", "http", 8080, time.Time{}), ResourceVersion: 10},
			},
			wantEPs: map[string]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend()
			a := newAgent(be, nil, 0, 0)
			for _, c := range initial {
				a.Observe(c)
			}
			require.NoError(t, a.SyncNow(context.Background()).Err)
			require.Len(t, be.lastState(t).Services, 2)
			for _, c := range tt.deletes {
				a.Observe(c)
			}
			require.NoError(t, a.SyncNow(context.Background()).Err)
			got := map[string]int{}
			for _, sp := range be.lastState(t).Services {
				got[sp.Name.Name] = len(sp.Endpoints)
			}
			assert.Equal(t, tt.wantEPs, got)
			assert.Equal(t, len(initial), a.Metrics().ServiceChanges+a.Metrics().EndpointChanges-len(tt.deletes))
		})
	}
}

func TestProgrammingLatency(t *testing.T) {
	type step struct {
		observe []Change
		now     time.Time // clock during the sync
		confirm time.Duration
		fail    bool
		want    []time.Duration // NetworkProgramming after the sync
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "recorded after a successful sync",
			steps: []step{{
				observe: []Change{{Slice: bt.SliceObject("a-1", "a", "http", 8080, t0, "10.244.1.1"), ResourceVersion: 1}},
				now:     t0.Add(1500 * time.Millisecond),
				want:    []time.Duration{1500 * time.Millisecond},
			}},
		},
		{
			name: "no annotation, deleted slice or bad time: nothing",
			steps: []step{{
				observe: []Change{
					{Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}, "10.244.1.1"), ResourceVersion: 1},
					{Deleted: true, Slice: bt.SliceObject("a-2", "a", "http", 8080, t0), ResourceVersion: 2},
					{Slice: func() *discoveryv1.EndpointSlice {
						s := bt.SliceObject("a-3", "a", "http", 8080, time.Time{}, "10.244.1.3")
						s.Annotations = map[string]string{TriggerTimeAnnotation: "yesterday"}
						return s
					}(), ResourceVersion: 3},
					{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 4},
				},
				now: t0.Add(time.Second),
			}},
		},
		{
			name: "triggers of a failed sync kept for the next",
			steps: []step{
				{
					observe: []Change{{Slice: bt.SliceObject("a-1", "a", "http", 8080, t0, "10.244.1.1"), ResourceVersion: 1}},
					now:     t0.Add(time.Second),
					fail:    true,
				},
				{
					observe: []Change{{Slice: bt.SliceObject("a-2", "a", "http", 8080, t0.Add(2*time.Second), "10.244.1.2"), ResourceVersion: 2}},
					now:     t0.Add(5 * time.Second),
					want:    []time.Duration{5 * time.Second, 3 * time.Second},
				},
				{
					// Measured once: a later sync without triggers adds nothing.
					now:  t0.Add(9 * time.Second),
					want: []time.Duration{5 * time.Second, 3 * time.Second},
				},
			},
		},
		{
			// Upstream kube-proxy's backend confirms for a quiet period after the rules
			// were in place: the sync ended when they were.
			name: "the backend's confirmation is not programming latency",
			steps: []step{{
				observe: []Change{{Slice: bt.SliceObject("a-1", "a", "http", 8080, t0, "10.244.1.1"), ResourceVersion: 1}},
				now:     t0.Add(1500 * time.Millisecond),
				confirm: 150 * time.Millisecond,
				want:    []time.Duration{1350 * time.Millisecond},
			}},
		},
		{
			name: "every update of a slice counts",
			steps: []step{{
				observe: []Change{
					{Slice: bt.SliceObject("a-1", "a", "http", 8080, t0, "10.244.1.1"), ResourceVersion: 1},
					{Slice: bt.SliceObject("a-1", "a", "http", 8080, t0.Add(time.Second), "10.244.1.2"), ResourceVersion: 2},
				},
				now:  t0.Add(3 * time.Second),
				want: []time.Duration{3 * time.Second, 2 * time.Second},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{}
			be := newFakeBackend()
			a := newAgent(be, clock.Now, 0, 0)
			for i, st := range tt.steps {
				for _, c := range st.observe {
					a.Observe(c)
				}
				clock.Set(st.now)
				if st.fail {
					be.failSyncs(1)
				}
				be.mu.Lock()
				be.confirm = st.confirm
				be.mu.Unlock()
				end := st.now.Add(-st.confirm)
				rec := a.SyncNow(context.Background())
				assert.Equal(t, st.fail, rec.Err != nil, "step %d", i)
				assert.Equal(t, end, rec.End)
				m := a.Metrics()
				assert.ElementsMatch(t, st.want, m.NetworkProgramming, "step %d", i)
				if !st.fail {
					assert.Equal(t, end, m.LastSync, "step %d", i)
				}
			}
		})
	}
}

func TestObjectlessChange(t *testing.T) {
	svc := func(rv uint64) Change {
		return Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: rv}
	}
	bare := func(rv uint64) Change { return Change{ResourceVersion: rv} }
	type step struct {
		observe []Change
		// duringSync are observed while the backend syncs.
		duringSync []Change
		sync       bool
		fail       bool
		// synced is the resource version WaitSynced must accept now; notSynced one it must
		// not (0 for no check).
		synced, notSynced uint64
	}
	tests := []struct {
		name      string
		steps     []step
		wantSyncs int
	}{
		{
			name: "nothing pending: advances without a sync",
			steps: []step{
				{observe: []Change{svc(1)}, sync: true, synced: 1, notSynced: 2},
				{observe: []Change{bare(2), bare(5)}, synced: 5, notSynced: 6},
			},
			wantSyncs: 1,
		},
		{
			name: "change pending: waits for the sync",
			steps: []step{
				{observe: []Change{svc(1)}, sync: true, synced: 1},
				{observe: []Change{svc(2), bare(3)}, synced: 1, notSynced: 2},
				{sync: true, synced: 3, notSynced: 4},
			},
			wantSyncs: 2,
		},
		{
			name: "after a failed sync: waits for the retry",
			steps: []step{
				{observe: []Change{svc(1)}, sync: true, fail: true, notSynced: 1},
				{observe: []Change{bare(2)}, notSynced: 1},
				{sync: true, synced: 2},
			},
			wantSyncs: 2,
		},
		{
			name: "before the first sync: no version is synced",
			steps: []step{
				{observe: []Change{bare(1)}, notSynced: 1},
				{sync: true, synced: 1},
			},
			wantSyncs: 1,
		},
		{
			name: "during a sync: covered by it",
			steps: []step{
				{observe: []Change{svc(1)}, duringSync: []Change{bare(2)}, sync: true, synced: 2, notSynced: 3},
			},
			wantSyncs: 1,
		},
		{
			name: "during a sync after an object change: not covered",
			steps: []step{
				{observe: []Change{svc(1)}, duringSync: []Change{svc(2), bare(3)}, sync: true, synced: 1, notSynced: 2},
				{sync: true, synced: 3},
			},
			wantSyncs: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend()
			a := newAgent(be, nil, 0, 0)
			var during []Change
			be.onSync = func() {
				for _, c := range during {
					a.Observe(c)
				}
			}
			for i, st := range tt.steps {
				for _, c := range st.observe {
					a.Observe(c)
				}
				if st.sync {
					if st.fail {
						be.failSyncs(1)
					}
					during = st.duringSync
					rec := a.SyncNow(context.Background())
					during = nil
					assert.Equal(t, st.fail, rec.Err != nil, "step %d", i)
				}
				if st.synced > 0 {
					assert.NoError(t, a.WaitSynced(cancelled(), st.synced), "step %d", i)
				}
				if st.notSynced > 0 {
					assert.Error(t, a.WaitSynced(cancelled(), st.notSynced), "step %d", i)
				}
			}
			assert.Len(t, be.syncs(), tt.wantSyncs)
		})
	}
}

func TestObjectlessChangeWakesWaiter(t *testing.T) {
	be := newFakeBackend()
	a := newAgent(be, nil, 0, 0)
	a.Observe(Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1})
	require.NoError(t, a.SyncNow(context.Background()).Err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- a.WaitSynced(ctx, 7) }()
	a.Observe(Change{ResourceVersion: 7})
	require.NoError(t, <-waited)
	assert.Len(t, be.syncs(), 1, "no sync for an object-less change")
}

func TestConsume(t *testing.T) {
	tests := []struct {
		name   string
		stop   func(ch chan Change, cancel context.CancelFunc)
		wantAt int // changes observed at least
	}{
		{name: "channel closed", stop: func(ch chan Change, _ context.CancelFunc) { close(ch) }, wantAt: 3},
		{name: "context cancelled", stop: func(_ chan Change, cancel context.CancelFunc) { cancel() }, wantAt: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAgent(newFakeBackend(), nil, 0, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := make(chan Change) // unbuffered: each send returns once Consume took it
			done := make(chan struct{})
			go func() {
				a.Consume(ctx, ch)
				close(done)
			}()
			ch <- Change{Service: bt.ServiceObject("a", "10.96.0.10", bt.TCPPort("http", 80)), ResourceVersion: 1}
			ch <- Change{Slice: bt.SliceObject("a-1", "a", "http", 8080, time.Time{}, "10.244.1.1"), ResourceVersion: 2}
			ch <- Change{Service: bt.ServiceObject("b", "10.96.0.11", bt.TCPPort("http", 80)), ResourceVersion: 3}
			tt.stop(ch, cancel)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Consume did not return")
			}
			m := a.Metrics()
			assert.Equal(t, tt.wantAt, m.ServiceChanges+m.EndpointChanges)
			require.NoError(t, a.SyncNow(context.Background()).Err)
			assert.NoError(t, a.WaitSynced(cancelled(), 3))
		})
	}
}

// nodeIPs parses the addresses of a NodeView.
func nodeIPs(ips ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, s := range ips {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
