//go:build linux

package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/cluster"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
	"kpbench.dev/kpbench/testbed"
)

// Defaults of a churn step's prober (ChurnProbe).
const (
	DefaultChurnProbeWorkers  = 8
	DefaultChurnProbeInterval = 10 * time.Millisecond
	DefaultChurnProbeTimeout  = 500 * time.Millisecond
	DefaultChurnProbeDeadline = 30 * time.Second
)

// churnDeleteLag is how old a Service the mixed pattern added must be before the pattern
// deletes it: long enough for its addition to be programmed and seen first.
const churnDeleteLag = 2 * time.Second

// churnRun is what a mixed churn step leaves for the measurements after it.
type churnRun struct {
	log        *measure.ChangeLog // nil without a prober
	agent      *agent.Agent       // the probing node's
	start, end time.Time          // the churn's changes (end: the prober's tail included)
	target     float64            // changes per second asked
	achieved   float64            // changes per second made
	changes    int
	result     *measure.ChurnResult // Analyze, once measured
}

// analyze judges the churn's log against the probing node's syncs (once).
func (c *churnRun) analyze() measure.ChurnResult {
	if c.result == nil {
		res := c.log.Analyze(c.agent.Records())
		c.result = &res
	}
	return *c.result
}

// synthExtra is a Service the mixed pattern added.
type synthExtra struct {
	index   int
	trigger time.Time
}

// churnMixed runs the mixed pattern: at c.Rate changes per second for c.Duration, it
// cycles through replacing one endpoint of an existing synthetic Service (round robin over
// the first c.Services of them), adding a
// Service, and deleting one it added at least churnDeleteLag before (or, when none is that
// old yet, another endpoint replacement). With c.Probe, a prober runs meanwhile and
// every change is logged for the programming-latency and churn measurements.
func (r *backendRun) churnMixed(ctx context.Context, c *ChurnStep) (err error) {
	t := r.template
	base := r.synthCount
	if base == 0 {
		return fmt.Errorf("churn mixed: no synthetic services yet (add some first)")
	}
	if t.EndpointsPerService >= len(r.synthPods) {
		return fmt.Errorf("churn mixed: %d endpoints per service leave no spare pod to move an endpoint to (at most %d)", t.EndpointsPerService, len(r.synthPods)-1)
	}
	podName := map[netip.Addr]string{}
	for _, h := range r.tb.Lab.Hosts(lab.KindPod) {
		podName[h.IP] = h.Name
	}
	names := make([]string, len(r.synthPods))
	for k, b := range r.synthPods {
		names[k] = podName[b.IP]
	}
	eps := max(t.EndpointsPerService, 1)
	podsOf := func(i, gen int) []string {
		out := make([]string, eps)
		for k := range eps {
			out[k] = names[(i+gen+k)%len(names)]
		}
		return out
	}
	// Snapshots for the prober's random picks (it runs concurrently with the changes).
	ips := map[string]netip.Addr{}
	for _, svc := range r.tb.Cluster.Services() {
		if svc.Namespace == synth.Namespace {
			if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
				ips[svc.Name] = ip
			}
		}
	}
	gens := maps.Clone(r.synthGen)
	target := func(name string) netip.AddrPort { return netip.AddrPortFrom(ips[name], uint16(t.Port)) }
	key := func(i int) string { return synth.Namespace + "/" + synth.Name(i) }

	run := &churnRun{target: c.Rate}
	var log *measure.ChangeLog
	stop := make(chan struct{})
	stopProber := sync.OnceFunc(func() { close(stop) })
	defer stopProber()
	proberDone := make(chan struct{})
	close(proberDone) // replaced by the prober's when there is one
	if c.Probe != nil {
		log = measure.NewChangeLog()
		run.log = log
		node := c.Probe.Node
		if node == "" {
			node = lab.NodeName(0)
		}
		for _, ag := range r.tb.Agents {
			if ag.Node() == node {
				run.agent = ag
			}
		}
		h, ok := r.tb.Lab.Host(testbed.ProbePod(node))
		if run.agent == nil || !ok {
			return fmt.Errorf("churn probe: no node %q with a probe pod in the lab", node)
		}
		o := measure.ChurnProberOptions{Workers: DefaultChurnProbeWorkers, Interval: DefaultChurnProbeInterval,
			Timeout: DefaultChurnProbeTimeout, Deadline: DefaultChurnProbeDeadline}
		if c.Probe.Workers > 0 {
			o.Workers = c.Probe.Workers
		}
		for _, d := range []struct {
			from *Duration
			to   *time.Duration
		}{{c.Probe.Interval, &o.Interval}, {c.Probe.Timeout, &o.Timeout}, {c.Probe.Deadline, &o.Deadline}} {
			if d.from != nil {
				*d.to = d.from.Duration
			}
		}
		o.Random = func(rng *rand.Rand) (string, bool) {
			i := rng.IntN(base)
			name := synth.Name(i)
			if _, ok := ips[name]; !ok {
				return "", false
			}
			log.Baseline(key(i), target(name), podsOf(i, gens[i]))
			return key(i), true
		}
		pr, err := probe.New(h.NetNSPath, probe.WithWorkers(o.Workers))
		if err != nil {
			return fmt.Errorf("churn probe from %s: %w", h.Name, err)
		}
		defer pr.Close()
		done := make(chan struct{})
		proberDone = done
		pctx, cancel := context.WithCancel(ctx)
		defer func() { // on an error, stop the prober at once; then wait for it
			if err != nil {
				cancel()
			}
			stopProber()
			<-done
			cancel()
		}()
		go func() {
			defer close(done)
			measure.RunChurnProber(pctx, pr, log, o, stop)
		}()
	}

	var extras []synthExtra
	nextAdd := base // the Services [base, nextAdd) that exist are in extras
	annotate := func(sl *discoveryv1.EndpointSlice, at time.Time) *discoveryv1.EndpointSlice {
		if sl.Annotations == nil {
			sl.Annotations = map[string]string{}
		}
		sl.Annotations[corev1.EndpointsLastChangeTriggerTime] = at.UTC().Format(time.RFC3339Nano)
		return sl
	}
	replaceEndpoint := func(ctx context.Context) error {
		i := r.churnNext % min(base, c.Services)
		r.churnNext++
		old := r.synthGen[i]
		r.synthGen[i]++
		at := time.Now()
		if err := r.tb.Apply(ctx, annotate(synth.Slice(i, r.synthGen[i], t, r.synthPods), at)); err != nil {
			return err
		}
		if log != nil {
			rv := r.tb.Cluster.ResourceVersion()
			pods := podsOf(i, r.synthGen[i])
			log.Baseline(key(i), target(synth.Name(i)), podsOf(i, old))
			log.Record(measure.Change{Kind: measure.ChangeEndpoint, Service: key(i), Trigger: at, RV: rv, Pods: pods, NewPod: pods[len(pods)-1]}, netip.AddrPort{})
		}
		return nil
	}
	add := func(ctx context.Context) error {
		i := nextAdd
		nextAdd++
		at := time.Now()
		objs := []runtime.Object{synth.Service(i, t), annotate(synth.Slice(i, 0, t, r.synthPods), at)}
		if err := r.tb.Apply(ctx, objs...); err != nil {
			return err
		}
		extras = append(extras, synthExtra{index: i, trigger: at})
		if log != nil {
			rv := r.tb.Cluster.ResourceVersion()
			o, err := r.tb.Cluster.Get(cluster.KindService, synth.Namespace, synth.Name(i))
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(o.(*corev1.Service).Spec.ClusterIP)
			if err != nil {
				return fmt.Errorf("churn: service %s: %w", key(i), err)
			}
			log.Record(measure.Change{Kind: measure.ChangeAdd, Service: key(i), Trigger: at, RV: rv, Pods: podsOf(i, 0)}, netip.AddrPortFrom(ip, uint16(t.Port)))
		}
		return nil
	}
	deleteExtra := func(ctx context.Context, i int) (time.Time, error) {
		at := time.Now()
		if err := r.tb.Cluster.Delete(ctx, cluster.KindEndpointSlice, synth.Namespace, synth.Name(i)+"-synth"); err != nil {
			return at, err
		}
		return at, r.tb.Cluster.Delete(ctx, cluster.KindService, synth.Namespace, synth.Name(i))
	}
	del := func(ctx context.Context) error {
		if len(extras) == 0 || time.Since(extras[0].trigger) < churnDeleteLag {
			return replaceEndpoint(ctx)
		}
		i := extras[0].index
		extras = extras[1:]
		at, err := deleteExtra(ctx, i)
		if err != nil {
			return err
		}
		if log != nil {
			log.Record(measure.Change{Kind: measure.ChangeDelete, Service: key(i), Trigger: at, RV: r.tb.Cluster.ResourceVersion()}, netip.AddrPort{})
		}
		return nil
	}
	cycle := []func(context.Context) error{replaceEndpoint, add, del}

	// At the rate: every 10 ms, make the changes that are due, one Apply each.
	run.start = time.Now()
	deadline := run.start.Add(c.Duration.Duration)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	done := 0
	for time.Now().Before(deadline) {
		due := int(c.Rate*time.Since(run.start).Seconds()) - done
		for ; due > 0 && time.Now().Before(deadline); due-- {
			if err := cycle[done%len(cycle)](ctx); err != nil {
				return fmt.Errorf("churn mixed, change %d: %w", done+1, err)
			}
			done++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	elapsed := time.Since(run.start)
	run.changes, run.achieved = done, float64(done)/elapsed.Seconds()
	if run.achieved < 0.95*c.Rate {
		r.logf("churn: asked for %.1f changes/s, made %.1f/s (%d in %.1fs): the runner could not keep up", c.Rate, run.achieved, done, elapsed.Seconds())
	}
	stopProber()
	<-proberDone
	run.end = time.Now()
	r.lastChurn = run
	// Leave the Service count as it was: delete what the step added and did not delete.
	var errs []error
	for _, e := range extras {
		_, err := deleteExtra(ctx, e.index)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// churnMeasurements are the measurements of the last mixed churn step: correctness
// (misroutes, false refusals, other probe failures), the rate achieved and the probing
// node's sync durations during the churn.
func (r *backendRun) churnMeasurements(labels map[string]string) ([]reports.Measurement, error) {
	c := r.lastChurn
	if c == nil || c.log == nil {
		return nil, fmt.Errorf("measure churn: needs a mixed churn step with a probe before it")
	}
	res := c.analyze()
	out := res.CorrectnessMeasurements(labels)
	rate := reports.Measurement{Name: measure.MeasureChurnRate, Params: clone(labels), Unit: reports.UnitPerSecond,
		Samples: []float64{c.achieved}, Extra: map[string]float64{"target": c.target, "changes": float64(c.changes)}}
	out = append(out, rate)
	var full, partial []float64
	for _, rec := range c.agent.Records() {
		if rec.Err != nil || rec.Start.Before(c.start) || rec.End.After(c.end) {
			continue
		}
		if rec.Result.Full {
			full = append(full, rec.Duration().Seconds())
		} else {
			partial = append(partial, rec.Duration().Seconds())
		}
	}
	for _, k := range []struct {
		kind    string
		samples []float64
	}{{"full", full}, {"partial", partial}} {
		if len(k.samples) == 0 {
			continue
		}
		p := clone(labels)
		p["kind"] = k.kind
		out = append(out, reports.Measurement{Name: measure.MeasureChurnSync, Params: p, Unit: reports.UnitSeconds, Samples: k.samples})
	}
	return out, nil
}

// programmingLatency returns both halves of programming latency: from the last probed
// churn's log when there is one, else the sync half from the agents' metrics (every
// EndpointSlice change with a trigger time, as kube-proxy measures it).
func (r *backendRun) programmingLatency(labels map[string]string) []reports.Measurement {
	if r.lastChurn == nil || r.lastChurn.log == nil {
		return []reports.Measurement{measure.ProgrammingLatency(r.tb, labels)}
	}
	return r.lastChurn.analyze().LatencyMeasurements(labels)
}

// checkLimits records a case per limit of the measure step over the measurements it
// produced, and fails when any is exceeded.
func (r *backendRun) checkLimits(m *MeasureStep, out []reports.Measurement) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m.Limits)) {
		limit := m.Limits[name]
		c := reports.Case{Name: fmt.Sprintf("%s <= %s", name, strconv.FormatFloat(limit, 'g', -1, 64)), Backend: r.backend, Result: reports.CasePass}
		found, worst := false, 0.0
		for _, mm := range out {
			if mm.Name != name {
				continue
			}
			for _, s := range mm.Samples {
				if !found || s > worst {
					worst = s
				}
				found = true
			}
		}
		switch {
		case !found:
			c.Result, c.Reason = reports.CaseFail, fmt.Sprintf("measure %s produced no %s", m.Name, name)
		case worst > limit:
			c.Result, c.Reason = reports.CaseFail, fmt.Sprintf("%s is %g, above the limit %g", name, worst, limit)
		}
		if found {
			c.Evidence = fmt.Sprintf("%s = %g", name, worst)
			if r.lastChurn != nil && r.lastChurn.result != nil && strings.HasPrefix(name, "churn-") && len(r.lastChurn.result.Examples) > 0 {
				c.Evidence += "\n" + strings.Join(r.lastChurn.result.Examples, "\n")
			}
		}
		if c.Result == reports.CaseFail {
			errs = append(errs, errors.New(c.Reason))
		}
		r.res.Cases = append(r.res.Cases, c)
	}
	return errors.Join(errs...)
}
