//go:build linux

package measure

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
)

// Change kinds of a churn.
const (
	// ChangeEndpoint: one endpoint of a Service replaced by another pod.
	ChangeEndpoint = "endpoint"
	// ChangeAdd: a Service created, with its endpoints.
	ChangeAdd = "add"
	// ChangeDelete: a Service (and its slice) deleted.
	ChangeDelete = "delete"
)

// Change is one change a churn made to one Service.
type Change struct {
	// Kind is ChangeEndpoint, ChangeAdd or ChangeDelete.
	Kind string
	// Service is "namespace/name".
	Service string
	// Trigger is when the scenario changed the object; RV the control plane's resource
	// version after the change (the sync carrying the change is the first successful one
	// whose ResourceVersion reaches it).
	Trigger time.Time
	RV      uint64
	// Pods are the Service's endpoints (pod names) after the change; nil for a delete.
	Pods []string
	// NewPod is the pod an endpoint change added: the data plane has the change once a
	// probe is answered by it.
	NewPod string
}

// Observation is one probe of a churn's prober.
type Observation struct {
	// Service is the probed Service ("namespace/name").
	Service string
	// Start is when the probe began (before its connect), End when its outcome was known.
	Start, End time.Time
	// Class is the probe's outcome; Pod the pod that answered (Class OK).
	Class probe.ErrClass
	Pod   string
}

// version is one state of a Service: its endpoints (nil: deleted) since trigger.
type version struct {
	change  int // index in ChangeLog.changes; -1 for the baseline
	trigger time.Time
	rv      uint64
	pods    []string
}

// ChangeLog collects the changes a churn makes and what its prober saw, and judges them
// against the probing node's syncs. It is safe for concurrent use.
type ChangeLog struct {
	mu       sync.Mutex
	changes  []Change
	versions map[string][]version      // per service, in trigger order
	targets  map[string]netip.AddrPort // per service: its ClusterIP:port
	observed []bool                    // per change: seen in the data plane
	open     int                       // changes before this one are seen or expired
	obs      []Observation
}

// NewChangeLog returns an empty log.
func NewChangeLog() *ChangeLog {
	return &ChangeLog{versions: map[string][]version{}, targets: map[string]netip.AddrPort{}}
}

// Baseline records the state of a Service the churn has not changed yet (programmed long
// ago): its address and endpoints. It does nothing when the Service is already known.
func (l *ChangeLog) Baseline(service string, target netip.AddrPort, pods []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.versions[service]; ok {
		return
	}
	l.targets[service] = target
	l.versions[service] = []version{{change: -1, pods: slices.Clone(pods)}}
}

// Record adds a change (call Baseline first for a Service that existed before the
// churn); target is the Service's address (kept from the baseline when invalid).
func (l *ChangeLog) Record(c Change, target netip.AddrPort) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if target.IsValid() {
		l.targets[c.Service] = target
	}
	l.changes = append(l.changes, c)
	l.observed = append(l.observed, false)
	l.versions[c.Service] = append(l.versions[c.Service], version{change: len(l.changes) - 1, trigger: c.Trigger, rv: c.RV, pods: slices.Clone(c.Pods)})
}

// Destination returns a Service's address (where the churn prober sends).
func (l *ChangeLog) Destination(service string) (netip.AddrPort, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.targets[service]
	return t, ok
}

// Observe adds a probe's outcome, and marks the changes it shows as seen.
func (l *ChangeLog) Observe(o Observation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.obs = append(l.obs, o)
	for _, v := range l.versions[o.Service] {
		if v.change >= 0 && !l.observed[v.change] && shows(l.changes[v.change], o) {
			l.observed[v.change] = true
		}
	}
}

// shows reports whether observation o, of c's Service, shows change c in the data plane.
func shows(c Change, o Observation) bool {
	if o.Start.Before(c.Trigger) {
		return false
	}
	switch c.Kind {
	case ChangeEndpoint:
		return o.Class == probe.OK && o.Pod == c.NewPod
	case ChangeAdd:
		return o.Class == probe.OK
	case ChangeDelete:
		return o.Class != probe.OK
	}
	return false
}

// Pending returns the Services with a change not yet seen in the data plane and younger
// than deadline at now, oldest change first (each Service once).
func (l *ChangeLog) Pending(now time.Time, deadline time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.open < len(l.changes) && (l.observed[l.open] || now.Sub(l.changes[l.open].Trigger) > deadline) {
		l.open++
	}
	var out []string
	seen := map[string]bool{}
	for i := l.open; i < len(l.changes); i++ {
		c := l.changes[i]
		if l.observed[i] || now.Sub(c.Trigger) > deadline || seen[c.Service] {
			continue
		}
		seen[c.Service] = true
		out = append(out, c.Service)
	}
	return out
}

// Recent returns the Services changed within window before now that still exist (their
// latest version has endpoints).
func (l *ChangeLog) Recent(now time.Time, window time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for i := len(l.changes) - 1; i >= 0 && now.Sub(l.changes[i].Trigger) <= window; i-- {
		c := l.changes[i]
		if seen[c.Service] {
			continue
		}
		seen[c.Service] = true
		vs := l.versions[c.Service]
		if vs[len(vs)-1].pods != nil {
			out = append(out, c.Service)
		}
	}
	return out
}

// ChurnResult is what a churn's log shows against the probing node's syncs.
type ChurnResult struct {
	// SyncLatency is, per change carried by a successful sync, trigger to sync end.
	SyncLatency []time.Duration
	// DataplaneLatency is, per change seen by a probe, trigger to the start of the first
	// probe that saw it.
	DataplaneLatency []time.Duration
	// Changes counts the changes per kind; Unsynced those no successful sync carried;
	// Unobserved those no probe saw (superseded by a later change of the same Service
	// first, or never seen before the deadline).
	Changes              map[string]int
	Unsynced, Unobserved int
	// Probes is the number of probes; Misroutes, FalseRefusals and OtherFailures are
	// as reports.MeasureChurnMisroutes, reports.MeasureChurnFalseRefusals and reports.MeasureChurnProbeFailures.
	Probes                                  int
	Misroutes, FalseRefusals, OtherFailures int
	// LiveProbes counts the probes of live Services (programmed before the probe began,
	// not deleted while it ran): those that must be answered, which FalseRefusals and
	// OtherFailures are among.
	LiveProbes int
	// Examples describe the first misroutes and false refusals (evidence).
	Examples []string
}

// maxExamples bounds ChurnResult.Examples.
const maxExamples = 5

// syncEnd returns the end of the first successful sync carrying resource version rv
// (syncs in order), or false when none did.
func syncEnd(syncs []agent.SyncRecord, rv uint64) (time.Time, bool) {
	i, _ := slices.BinarySearchFunc(syncs, rv, func(r agent.SyncRecord, rv uint64) int {
		if r.ResourceVersion < rv {
			return -1
		}
		return 1
	})
	for ; i < len(syncs); i++ {
		if syncs[i].Err == nil && syncs[i].ResourceVersion >= rv {
			return syncs[i].End, true
		}
	}
	return time.Time{}, false
}

// Analyze judges the log against syncs, the probing node's sync records in order.
//
// A probe that started at S and ended at E may reach the endpoints of the Service's last
// version programmed before S (its sync ended before S), and of every later version
// triggered before E (in flight: a sync may be programming it). Anything else is a
// misroute: an endpoint removed by a sync that ended before the probe started, or a
// Service deleted by one. A probe is a false refusal when it is refused while every
// version it may see has ready endpoints: the Service was added by a sync that ended
// before S and not deleted before E.
func (l *ChangeLog) Analyze(syncs []agent.SyncRecord) ChurnResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Records carry non-decreasing resource versions; keep the successful ones.
	var ok []agent.SyncRecord
	for _, r := range syncs {
		if r.Err == nil {
			ok = append(ok, r)
		}
	}
	res := ChurnResult{Changes: map[string]int{}, Probes: len(l.obs)}
	ends := make([]time.Time, len(l.changes)) // zero: not synced
	for i, c := range l.changes {
		res.Changes[c.Kind]++
		if end, found := syncEnd(ok, c.RV); found {
			ends[i] = end
			res.SyncLatency = append(res.SyncLatency, end.Sub(c.Trigger))
		} else {
			res.Unsynced++
		}
	}
	// Dataplane: the first observation (by start) showing each change.
	first := make([]time.Time, len(l.changes))
	for _, o := range l.obs {
		for _, v := range l.versions[o.Service] {
			if v.change < 0 {
				continue
			}
			c := l.changes[v.change]
			if shows(c, o) && (first[v.change].IsZero() || o.Start.Before(first[v.change])) {
				first[v.change] = o.Start
			}
		}
	}
	for i, c := range l.changes {
		if first[i].IsZero() {
			res.Unobserved++
			continue
		}
		res.DataplaneLatency = append(res.DataplaneLatency, first[i].Sub(c.Trigger))
	}
	example := func(format string, args ...any) {
		if len(res.Examples) < maxExamples {
			res.Examples = append(res.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, o := range l.obs {
		vs := l.versions[o.Service]
		// cur: the last version programmed before the probe started.
		cur := -1
		for k, v := range vs {
			if v.change < 0 {
				cur = k
				continue
			}
			if end := ends[v.change]; !end.IsZero() && end.Before(o.Start) {
				cur = k
			}
		}
		allowed := map[string]bool{}
		live := cur >= 0 && len(vs[cur].pods) > 0
		for k, v := range vs {
			if k < cur || (k > cur && v.trigger.After(o.End)) {
				continue
			}
			for _, p := range v.pods {
				allowed[p] = true
			}
			if k > cur && v.pods == nil {
				live = false // a delete in flight
			}
		}
		if live {
			res.LiveProbes++
		}
		switch {
		case o.Class == probe.OK && !allowed[o.Pod]:
			res.Misroutes++
			example("misroute: %s answered by %s at %s, allowed %v", o.Service, o.Pod, o.Start.Format("15:04:05.000"), slices.Sorted(maps.Keys(allowed)))
		case o.Class == probe.Refused && live:
			res.FalseRefusals++
			if len(res.Examples) < maxExamples {
				example("%s", l.refusalEvidence(o, vs[cur], ends, ok))
			}
		case o.Class != probe.OK && o.Class != probe.Refused && live:
			res.OtherFailures++
		}
	}
	return res
}

// refusalEvidence describes a false refusal: what was probed when, which sync had
// programmed the endpoints, the syncs that overlapped the probe, and what the later
// probes of the same Service saw (one refusal among answers is a transient; refusals
// only, a wrong state left in the kernel). Called with l.mu held.
func (l *ChangeLog) refusalEvidence(o Observation, cur version, ends []time.Time, syncs []agent.SyncRecord) string {
	const clock = "15:04:05.000"
	programmed := "before the churn"
	if cur.change >= 0 {
		c := l.changes[cur.change]
		programmed = fmt.Sprintf("%s change at %s, synced by %s", c.Kind, c.Trigger.Format(clock), ends[cur.change].Format(clock))
	}
	var overlap []string
	for _, r := range syncs {
		if r.End.After(o.Start) && r.Start.Before(o.End) {
			overlap = append(overlap, fmt.Sprintf("%s-%s (%d changed)", r.Start.Format(clock), r.End.Format(clock), r.Result.ChangedServices))
		}
	}
	later, laterAll := map[probe.ErrClass]int{}, 0
	for _, p := range l.obs {
		if p.Service == o.Service && p.Start.After(o.End) {
			later[p.Class]++
			laterAll++
		}
	}
	return fmt.Sprintf("false refusal: %s (%s) probed %s-%s, endpoints %v (%s); syncs during the probe %v; later probes of it: %d answered, %d refused, %d other",
		o.Service, l.targets[o.Service], o.Start.Format(clock), o.End.Format(clock), cur.pods, programmed,
		overlap, later[probe.OK], later[probe.Refused], laterAll-later[probe.OK]-later[probe.Refused])
}

// ChurnBounds are what a churn's prober must show besides the limits on its figures:
// enough probes of live Services for its verdict to mean something, and few of them lost.
// Without them a backend that drops a Service's traffic passes: its probes time out,
// which is neither a misroute nor a refusal.
type ChurnBounds struct {
	// MinLiveProbes is the fewest probes of live Services the verdict needs.
	MinLiveProbes int
	// MaxFailedShare bounds the share of the probes of live Services that failed
	// otherwise than by a refusal (timeouts, resets: OtherFailures / LiveProbes).
	MaxFailedShare float64
}

// Check returns why r is beyond b, or nil.
func (r ChurnResult) Check(b ChurnBounds) error {
	if r.LiveProbes < b.MinLiveProbes {
		return fmt.Errorf("too few probes to judge: %d of live Services (%d in all), at least %d needed", r.LiveProbes, r.Probes, b.MinLiveProbes)
	}
	if r.LiveProbes > 0 && float64(r.OtherFailures) > b.MaxFailedShare*float64(r.LiveProbes) {
		return fmt.Errorf("%d of %d probes of live Services timed out or were reset (%.2f%%), more than %g%%", r.OtherFailures, r.LiveProbes, 100*float64(r.OtherFailures)/float64(r.LiveProbes), 100*b.MaxFailedShare)
	}
	return nil
}

// LatencyMeasurements are both halves of programming latency (to the end of the sync, to
// the first probe that saw the change), with the changes counted in Extra.
func (r ChurnResult) LatencyMeasurements(extra map[string]string) []Measurement {
	syncM := r.measurement(reports.MeasureProgrammingLatency, extra, reports.UnitSeconds, seconds(r.SyncLatency))
	syncM.Params["half"] = "sync"
	syncM.Extra["unsynced"] = float64(r.Unsynced)
	dpM := r.measurement(reports.MeasureProgrammingLatencyDataplane, extra, reports.UnitSeconds, seconds(r.DataplaneLatency))
	dpM.Params["half"] = "dataplane"
	dpM.Extra["unobserved"] = float64(r.Unobserved)
	return []Measurement{syncM, dpM}
}

// CorrectnessMeasurements are misroutes, false refusals and other probe failures (Examples
// are not in them: the runner puts them in the evidence of its cases).
func (r ChurnResult) CorrectnessMeasurements(extra map[string]string) []Measurement {
	count := func(name string, n int) Measurement {
		return r.measurement(name, extra, reports.UnitCount, []float64{float64(n)})
	}
	return []Measurement{
		count(reports.MeasureChurnMisroutes, r.Misroutes),
		count(reports.MeasureChurnFalseRefusals, r.FalseRefusals),
		count(reports.MeasureChurnProbeFailures, r.OtherFailures),
	}
}

// measurement is one measurement of the churn, with extra as its params and the numbers
// of probes and of changes per kind in Extra.
func (r ChurnResult) measurement(name string, extra map[string]string, unit string, samples []float64) Measurement {
	m := Measurement{Name: name, Params: params(), Unit: unit, Samples: samples, Extra: map[string]float64{"probes": float64(r.Probes), "live_probes": float64(r.LiveProbes)}}
	for k, v := range extra {
		m.Params[k] = v
	}
	for k, n := range r.Changes {
		m.Extra["changes_"+k] = float64(n)
	}
	return m
}

// ChurnProberOptions tune RunChurnProber.
type ChurnProberOptions struct {
	// Workers is the number of probe goroutines (each one probe at a time).
	Workers int
	// Interval is each worker's pause between probes; Timeout bounds one probe;
	// Deadline is how long a change is waited for.
	Interval, Timeout, Deadline time.Duration
	// Recent is how long after its change a Service stays among the recently changed
	// ones probed for misroutes (default 3s).
	Recent time.Duration
	// Random returns a live Service to probe at random (registering its baseline in the
	// log), or false when there is none. It is called concurrently.
	Random func(r *rand.Rand) (string, bool)
}

// RunChurnProber probes with pr, from a fixed pool of workers, until stop is closed and
// then until every change of log is seen or past its deadline (or ctx ends). Each worker
// picks, in turn, a Service whose change is pending (mostly), one changed recently, or a
// random live one, sends one TCP request to its address and records the outcome in log.
func RunChurnProber(ctx context.Context, pr cluster.Prober, log *ChangeLog, o ChurnProberOptions, stop <-chan struct{}) {
	if o.Recent == 0 {
		o.Recent = 3 * time.Second
	}
	var wg sync.WaitGroup
	for w := range max(o.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; ; i++ {
				stopped := false
				select {
				case <-ctx.Done():
					return
				case <-stop:
					stopped = true
				default:
				}
				now := time.Now()
				pending := log.Pending(now, o.Deadline)
				if stopped && len(pending) == 0 {
					return
				}
				svc := ""
				switch {
				case len(pending) > 0 && (stopped || i%4 != 3):
					// Oldest first: a random one of the oldest Workers pending, so that
					// a backlog is worked off in order and no change waits unboundedly.
					svc = pending[rng.IntN(min(len(pending), max(o.Workers, 1)))]
				case i%8 == 3:
					if recent := log.Recent(now, o.Recent); len(recent) > 0 {
						svc = recent[rng.IntN(len(recent))]
					}
				default:
					if o.Random != nil {
						svc, _ = o.Random(rng)
					}
				}
				if target, ok := log.Destination(svc); ok {
					start := time.Now()
					res := pr.Request(ctx, probe.Destination{Addr: target, Protocol: lab.TCP}, probe.Options{Timeout: o.Timeout})
					if ctx.Err() != nil {
						return
					}
					log.Observe(Observation{Service: svc, Start: start, End: time.Now(), Class: res.Class, Pod: res.Answer.Pod})
				}
				if o.Interval > 0 {
					t := time.NewTimer(o.Interval)
					select {
					case <-ctx.Done():
						t.Stop()
						return
					case <-t.C:
					}
				}
			}
		}()
	}
	wg.Wait()
}
