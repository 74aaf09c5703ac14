//go:build linux

// Package synced is the bookkeeping every backend keeps about what it last programmed into
// a node's kernel, written once: whether the next sync must be full (the first one, after a
// failure, after ForceFullSync, after the kernel lost the rules), the snapshot of the last
// synced state and the service ports that changed since, the state check that forces a
// full sync when the rules are gone, and the UDP conntrack cleanup that follows a
// successful sync, as kube-proxy does.
//
// A backend holds a Tracker and, around each sync:
//
//	s := t.Begin()                     // s.Full: rewrite everything
//	changed := t.Changed(desired)      // for a partial sync
//	... program the kernel; on error: t.Failed() ...
//	err := t.Done(ctx, s, desired)     // snapshot, then conntrack cleanup
//
// Its methods are safe for concurrent use; ForceFullSync may come from another goroutine
// during a sync (the agent's periodic resync), and then the next sync is full too.
package synced

import (
	"context"
	"fmt"
	"sync"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/conntrack"
)

// FullSync decides whether a sync must be full: the first one, the one after a failure, and
// the one after ForceFullSync. Its zero value makes the next sync full. A backend that
// keeps no snapshot (upstream kube-proxy restarts its process for a full sync) uses it
// alone; Tracker builds on it.
type FullSync struct {
	mu sync.Mutex
	// partialOK is false until a sync succeeds, and again after Failed or ForceFullSync.
	partialOK bool
	// forced counts ForceFullSync calls, so that one that comes during a sync is not
	// forgotten when that sync succeeds.
	forced uint64
}

// Sync is one sync in progress, from Begin.
type Sync struct {
	// Full is true when the sync must rewrite everything.
	Full   bool
	forced uint64
}

// ForceFullSync makes the next sync full (kube-proxy does so every syncPeriod).
func (f *FullSync) ForceFullSync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partialOK = false
	f.forced++
}

// Begin starts a sync and says whether it must be full.
func (f *FullSync) Begin() Sync {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Sync{Full: !f.partialOK, forced: f.forced}
}

// Succeeded records that the sync s succeeded: the next one may be partial, unless
// ForceFullSync was called since s began.
func (f *FullSync) Succeeded(s Sync) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partialOK = f.forced == s.forced
}

// Failed makes the next sync full: after an error, what the kernel holds is unknown.
func (f *FullSync) Failed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partialOK = false
}

// Tracker keeps what a backend last programmed: FullSync, the snapshot of the last synced
// state, and the node's conntrack table for the cleanup after each sync.
type Tracker struct {
	FullSync
	ct conntrack.Table
	mu sync.Mutex
	// last is the state of the last successful sync (nil: none since New or Reset).
	last map[backends.ServicePortName]*backends.ServicePort
}

// New returns a Tracker whose first sync is full. ct is the node's conntrack table (for
// instance conntrack.Namespace{Path: nsPath}); nil means no conntrack cleanup (the
// backend proxies connections itself, or tests without a kernel).
func New(ct conntrack.Table) *Tracker { return &Tracker{ct: ct} }

// Begin starts a sync: full when FullSync says so, and also before anything was synced.
func (t *Tracker) Begin() Sync {
	s := t.FullSync.Begin()
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Full = s.Full || t.last == nil
	return s
}

// Programmed reports whether a sync succeeded since New or Reset: what a state check can
// compare the kernel with.
func (t *Tracker) Programmed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last != nil
}

// Last returns the service ports of the last successful sync, by name (nil before one).
// The map and its ports belong to the tracker: read them only.
func (t *Tracker) Last() map[backends.ServicePortName]*backends.ServicePort {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Changed returns the service ports of cur that are new or differ from the last synced
// state (ServicePort.Equal): those whose rules a partial sync rewrites. Every port of cur
// before the first sync.
func (t *Tracker) Changed(cur *backends.State) map[backends.ServicePortName]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := map[backends.ServicePortName]bool{}
	for _, sp := range cur.Services {
		if old, ok := t.last[sp.Name]; !ok || !old.Equal(sp) {
			changed[sp.Name] = true
		}
	}
	return changed
}

// Removed returns the service ports of the last synced state that cur no longer has.
func (t *Tracker) Removed(cur *backends.State) map[backends.ServicePortName]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := make(map[backends.ServicePortName]bool, len(cur.Services))
	for _, sp := range cur.Services {
		seen[sp.Name] = true
	}
	removed := map[backends.ServicePortName]bool{}
	for name := range t.last {
		if !seen[name] {
			removed[name] = true
		}
	}
	return removed
}

// Done records that the sync s programmed desired (a snapshot: later changes to desired do
// not show through) and then deletes the UDP conntrack entries the change made stale
// (conntrack.StaleUDP between the last synced state and desired). A cleanup failure is
// returned, but the rules are in place, so the next sync need not be full.
func (t *Tracker) Done(ctx context.Context, s Sync, desired *backends.State) error {
	t.mu.Lock()
	var filters []conntrack.Filter
	if t.ct != nil {
		// After New or Reset, nothing is known of the kernel: every UDP port with
		// endpoints counts as newly reachable, and entries made for a REJECT go.
		filters = conntrack.StaleUDP(t.last, desired)
	}
	t.mu.Unlock()
	return t.DoneWith(ctx, s, desired, filters)
}

// DoneWith is Done with the stale conntrack entries chosen by the backend (IPVS reads them
// off its diff against the kernel: a real server at weight 0 keeps its entries).
func (t *Tracker) DoneWith(ctx context.Context, s Sync, desired *backends.State, filters []conntrack.Filter) error {
	snap := backends.Snapshot(desired)
	t.mu.Lock()
	t.last = snap
	t.mu.Unlock()
	t.Succeeded(s)
	if t.ct == nil {
		return nil
	}
	if _, err := conntrack.Clear(ctx, t.ct, filters); err != nil {
		return fmt.Errorf("conntrack cleanup: %w", err)
	}
	return nil
}

// Reset forgets what was synced (the backend's Cleanup removed it): the next sync is full.
func (t *Tracker) Reset() {
	t.mu.Lock()
	t.last = nil
	t.mu.Unlock()
	t.Failed()
}

// Check runs a backend's check of its kernel state, as its CheckState method (see
// backends/agent.StateChecker): nil before anything was programmed (the next sync is full
// anyway); when check fails, the next sync is full and the error is returned.
func (t *Tracker) Check(ctx context.Context, check func(context.Context) error) error {
	if !t.Programmed() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := check(ctx); err != nil {
		t.Failed()
		return err
	}
	return nil
}
