// Package agent is the per-node proxy agent: what kube-proxy is on one node. It consumes the
// cluster's change feed (Services and EndpointSlices), keeps the node's desired state, and
// drives a backend through a bounded-frequency sync loop, recording every sync and the
// network programming latency of every change, under kube-proxy's metric names.
package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/internal/chans"
)

// TriggerTimeAnnotation is the EndpointSlice annotation that carries the time of the change
// that caused the slice's latest update (what kube-proxy measures programming latency from).
const TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// Change is one object change the agent consumes: a Service or an EndpointSlice, added,
// updated or deleted. At most one of Service and Slice is set; a Change with neither only
// advances the resource version (a change to an object the proxy does not watch).
type Change struct {
	// Deleted is true when the object is gone (the object holds its last state).
	Deleted bool
	// Service or Slice is the object.
	Service *corev1.Service
	Slice   *discoveryv1.EndpointSlice
	// ResourceVersion orders changes; WaitSynced waits for a version to be programmed.
	ResourceVersion uint64
}

// Config describes one node's agent.
type Config struct {
	// Node is the node this agent proxies for.
	Node backends.NodeView
	// View options: cluster CIDR and masqueradeAll.
	View backends.ViewOptions
	// Backend programs the node's kernel.
	Backend backends.Backend
	// MinSyncPeriod is the least time between two syncs (kube-proxy default 1s; 0 syncs
	// after every batch of changes). SyncPeriod forces a full sync this often (default 30s).
	MinSyncPeriod, SyncPeriod time.Duration
	// Now is the clock (default time.Now). Periodic syncs are full: backends with a
	// ForceFullSync method are told so before the sync.
	Now func() time.Time
	// CheckPeriod is how often the loop runs the backend's state check (StateChecker,
	// kube-proxy's canary monitor) between syncs. 0 means SyncPeriod; negative disables it.
	// A failed check makes the next sync full and starts it at once (subject to
	// MinSyncPeriod), so tampering is repaired within one CheckPeriod.
	CheckPeriod time.Duration
}

// StateChecker is implemented by backends that can tell cheaply whether the kernel still
// holds what their last successful sync wrote (kube-proxy watches canary chains for this:
// a firewall reload or an admin flushing the tables removes them). CheckState returns nil
// when the state is in place, and an error saying what is missing (or why it could not
// look) otherwise; the agent then forces a full sync. It is called from the sync loop,
// never concurrently with Sync, and only after a successful sync.
type StateChecker interface {
	CheckState(ctx context.Context) error
}

// unwrapper is implemented by backends that wrap another (backends/conntrack's UDP
// cleanup): optional interfaces are looked up through the wrappers.
type unwrapper interface{ Unwrap() backends.Backend }

// find returns b as a T, or the first backend b wraps that is one.
func find[T any](b backends.Backend) (T, bool) {
	for range 8 { // wrappers do not nest deeper; never loop forever on a cycle
		if v, ok := b.(T); ok {
			return v, true
		}
		u, ok := b.(unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	var zero T
	return zero, false
}

// findStateChecker returns the StateChecker of b or of a backend it wraps.
func findStateChecker(b backends.Backend) (StateChecker, bool) { return find[StateChecker](b) }

// forceFull tells the backend (or the one it wraps) that the next sync must be full.
func (a *Agent) forceFull() {
	if fs, ok := find[fullSyncer](a.cfg.Backend); ok {
		fs.ForceFullSync()
	}
}

// SyncRecord is one sync as the agent saw it.
type SyncRecord struct {
	// Start and End of the sync (End is when the kernel was programmed).
	Start, End time.Time
	// View is the time spent building the desired state from the objects.
	View time.Duration
	// Result is what the backend reported.
	Result backends.SyncResult
	// Err is the sync's error, if any.
	Err error
	// ResourceVersion is the newest change the sync carried.
	ResourceVersion uint64
	// Services is the number of service ports in the desired state.
	Services int
	// Periodic is true for a sync forced by SyncPeriod.
	Periodic bool
	// StateLost is the failed state check (StateChecker) that caused this sync, nil when
	// the sync had another cause.
	StateLost error
}

// Duration returns the sync's wall time.
func (r SyncRecord) Duration() time.Duration { return r.End.Sub(r.Start) }

// fullSyncer is implemented by backends that can be told to rewrite everything next time.
type fullSyncer interface{ ForceFullSync() }

// Agent is one node's proxy. Create it with New, then Run it.
type Agent struct {
	cfg Config

	mu        sync.Mutex
	view      *viewCache
	seenRV    uint64 // newest change received
	syncedRV  uint64 // newest change programmed by a successful sync
	objGen    uint64 // counts object changes (Service or Slice) received
	syncedGen uint64 // objGen as carried by the last successful sync
	pending   []pendingTrigger
	records   []SyncRecord
	metrics   Metrics
	changed   chan struct{}
	requests  chan syncRequest
	syncedSig chan struct{} // closed and replaced after every sync
	lastState *backends.State
	synced    bool           // a sync has succeeded
	health    *healthServers // see ServeHealth (nil: none)
}

type pendingTrigger struct {
	at time.Time
	rv uint64
}

// New returns an agent for cfg with defaults applied.
func New(cfg Config) *Agent {
	if cfg.SyncPeriod == 0 {
		cfg.SyncPeriod = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckPeriod == 0 {
		cfg.CheckPeriod = cfg.SyncPeriod
	}
	return &Agent{
		cfg:       cfg,
		view:      newViewCache(cfg.Node, cfg.View),
		changed:   make(chan struct{}, 1),
		requests:  make(chan syncRequest),
		syncedSig: make(chan struct{}),
		metrics:   newMetrics(),
	}
}

// Node returns the node's name.
func (a *Agent) Node() string { return a.cfg.Node.Name }

// Backend returns the agent's backend.
func (a *Agent) Backend() backends.Backend { return a.cfg.Backend }

// Observe feeds one change to the agent. It never blocks on the sync loop.
func (a *Agent) Observe(c Change) {
	a.mu.Lock()
	switch {
	case c.Service != nil:
		a.view.setService(c.Service, c.Deleted)
		a.metrics.ServiceChanges++
		a.objGen++
	case c.Slice != nil:
		a.view.setSlice(c.Slice, c.Deleted)
		a.metrics.EndpointChanges++
		a.objGen++
		if ts, ok := c.Slice.Annotations[TriggerTimeAnnotation]; ok && !c.Deleted {
			if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				a.pending = append(a.pending, pendingTrigger{at: t, rv: c.ResourceVersion})
			}
		}
	}
	if c.Service == nil && c.Slice == nil {
		// Nothing to program: if no object change is pending, the kernel is already up to
		// date with this version too. Otherwise the sync that programs the pending changes
		// covers it (see syncOnce).
		if a.objGen == a.syncedGen && c.ResourceVersion > a.syncedRV {
			a.syncedRV = c.ResourceVersion
			close(a.syncedSig)
			a.syncedSig = make(chan struct{})
		}
		if c.ResourceVersion > a.seenRV {
			a.seenRV = c.ResourceVersion
		}
		a.mu.Unlock()
		return
	}
	if c.ResourceVersion > a.seenRV {
		a.seenRV = c.ResourceVersion
	}
	a.health.queued()
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// Consume feeds every change from ch to the agent until ch closes or ctx ends.
func (a *Agent) Consume(ctx context.Context, ch <-chan Change) {
	for c := range chans.Each(ctx, ch) {
		a.Observe(c)
	}
}

// Run is the bounded-frequency sync loop: it syncs when changes arrived (at most once per
// MinSyncPeriod) and at least once per SyncPeriod (a full sync), until ctx ends. The first
// sync happens at once. Sync errors are recorded and retried at the next opportunity
// (backends make the sync after an error full).
func (a *Agent) Run(ctx context.Context) error {
	periodic := time.NewTimer(a.cfg.SyncPeriod)
	defer periodic.Stop()
	var last time.Time
	dirty, isPeriodic := true, false
	var stateLost error // a failed state check the next sync repairs
	retry := time.NewTimer(0)
	<-retry.C
	var checkC <-chan time.Time
	checker, hasChecker := findStateChecker(a.cfg.Backend)
	if hasChecker && a.cfg.CheckPeriod > 0 {
		check := time.NewTicker(a.cfg.CheckPeriod)
		defer check.Stop()
		checkC = check.C
	}
	for {
		if dirty {
			if wait := a.cfg.MinSyncPeriod - a.cfg.Now().Sub(last); !last.IsZero() && wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
			last = a.cfg.Now()
			a.drainChanged()
			rec := a.syncOnce(ctx, isPeriodic, stateLost)
			dirty, isPeriodic, stateLost = false, false, nil
			if rec.Err != nil {
				if ctx.Err() != nil {
					return nil
				}
				retry.Reset(max(a.cfg.MinSyncPeriod, 100*time.Millisecond))
			} else {
				retry.Stop()
			}
			if !periodic.Stop() {
				select {
				case <-periodic.C:
				default:
				}
			}
			periodic.Reset(a.cfg.SyncPeriod)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.changed:
			dirty = true
		case req := <-a.requests:
			if req.full {
				a.forceFull()
			}
			last = a.cfg.Now()
			a.drainChanged()
			rec := a.syncOnce(ctx, false, stateLost)
			stateLost = nil
			req.done <- rec
			dirty = false
			if rec.Err != nil {
				retry.Reset(max(a.cfg.MinSyncPeriod, 100*time.Millisecond))
			} else {
				retry.Stop()
			}
		case <-retry.C:
			dirty = true
		case <-periodic.C:
			dirty, isPeriodic = true, true
		case <-checkC:
			if dirty || !a.lastSyncOK() {
				continue // a sync is due anyway; a failed one makes the next full
			}
			if err := checker.CheckState(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				stateLost = fmt.Errorf("state check %s %s: %w", a.cfg.Node.Name, a.cfg.Backend.Name(), err)
				a.mu.Lock()
				a.metrics.StateLost++
				a.mu.Unlock()
				a.forceFull()
				dirty = true
			}
		}
	}
}

// lastSyncOK reports whether a sync has happened and the latest one succeeded.
func (a *Agent) lastSyncOK() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.records)
	return n > 0 && a.records[n-1].Err == nil
}

// drainChanged drops a pending change signal: the sync about to start carries every change
// observed so far, so the signal would only cause an empty sync after it. A change observed
// after the drain signals again.
func (a *Agent) drainChanged() {
	select {
	case <-a.changed:
	default:
	}
}

type syncRequest struct {
	full bool
	done chan SyncRecord
}

// ForceSync asks the running loop (Run) for one sync now, full if asked (on backends that
// can be told), and returns its record. It is how measurements time full and partial syncs
// at a given size without racing the loop.
func (a *Agent) ForceSync(ctx context.Context, full bool) (SyncRecord, error) {
	req := syncRequest{full: full, done: make(chan SyncRecord, 1)}
	select {
	case a.requests <- req:
	case <-ctx.Done():
		return SyncRecord{}, ctx.Err()
	}
	select {
	case rec := <-req.done:
		return rec, rec.Err
	case <-ctx.Done():
		return SyncRecord{}, ctx.Err()
	}
}

// SyncNow runs one sync immediately, outside the loop's timing (used by tests and by
// one-shot commands). Do not call it concurrently with Run.
func (a *Agent) SyncNow(ctx context.Context) SyncRecord { return a.syncOnce(ctx, false, nil) }

// CheckState runs the backend's state check once (nil when the backend has none), outside
// the loop's timing: for tests and one-shot commands. Do not call it concurrently with Run.
func (a *Agent) CheckState(ctx context.Context) error {
	sc, ok := findStateChecker(a.cfg.Backend)
	if !ok {
		return nil
	}
	if err := sc.CheckState(ctx); err != nil {
		return fmt.Errorf("state check %s %s: %w", a.cfg.Node.Name, a.cfg.Backend.Name(), err)
	}
	return nil
}

func (a *Agent) syncOnce(ctx context.Context, periodic bool, stateLost error) SyncRecord {
	rec := SyncRecord{Start: a.cfg.Now(), Periodic: periodic, StateLost: stateLost}
	a.mu.Lock()
	state := a.view.state() // rebuilds only the services that changed
	rv, gen := a.seenRV, a.objGen
	triggers := a.pending
	a.pending = nil
	a.mu.Unlock()

	if periodic {
		a.forceFull()
	}
	rec.ResourceVersion = rv
	rec.View = a.cfg.Now().Sub(rec.Start)
	rec.Services = len(state.Services)
	res, err := a.cfg.Backend.Sync(ctx, state)
	rec.End = a.cfg.Now().Add(-max(res.Confirm, 0))
	rec.Result = res
	if err != nil {
		rec.Err = fmt.Errorf("sync %s %s: %w", a.cfg.Node.Name, a.cfg.Backend.Name(), err)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	a.records = append(a.records, rec)
	a.metrics.observeSync(rec)
	if err != nil {
		a.pending = append(triggers, a.pending...) // measured when a later sync carries them
	} else {
		for _, tr := range triggers {
			a.metrics.NetworkProgramming = append(a.metrics.NetworkProgramming, rec.End.Sub(tr.at))
		}
		a.syncedRV = max(a.syncedRV, rv)
		a.syncedGen = gen
		if a.objGen == gen {
			// Only object-less changes arrived during the sync: they are covered too.
			a.syncedRV = max(a.syncedRV, a.seenRV)
		}
		a.lastState, a.synced = state, true
		a.health.programmed(ctx, state, rec.End, a.objGen != gen)
	}
	close(a.syncedSig)
	a.syncedSig = make(chan struct{})
	return rec
}

// WaitSynced blocks until a successful sync has happened and every change up to resource
// version rv is programmed, or ctx ends.
func (a *Agent) WaitSynced(ctx context.Context, rv uint64) error {
	for {
		a.mu.Lock()
		done, sig := a.synced && a.syncedRV >= rv, a.syncedSig
		var lastErr error
		if n := len(a.records); n > 0 {
			lastErr = a.records[n-1].Err
		}
		a.mu.Unlock()
		if done {
			return nil
		}
		if errors.Is(lastErr, backends.ErrMachineLimit) {
			return fmt.Errorf("node %s: not synced to version %d: %w", a.cfg.Node.Name, rv, lastErr)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("node %s: not synced to version %d: %w", a.cfg.Node.Name, rv, ctx.Err()), lastErr)
		case <-sig:
		}
	}
}

// Records returns a copy of every sync so far.
func (a *Agent) Records() []SyncRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]SyncRecord(nil), a.records...)
}

// LastState returns the desired state of the last successful sync (nil before one).
func (a *Agent) LastState() *backends.State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastState
}

// Metrics returns a snapshot of the agent's metrics.
func (a *Agent) Metrics() Metrics {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.metrics.clone()
}
