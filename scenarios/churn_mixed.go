//go:build linux

package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/manifest"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
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

// churnRun is what a mixed churn step leaves for the measurements after it (the
// programming-latency and churn measurements).
type churnRun struct {
	log        *measure.ChangeLog // nil without a prober
	proxy      cluster.Proxy      // the probing node's
	start, end time.Time          // the churn's changes (end: the prober's tail included)
	target     float64            // changes per second asked
	achieved   float64            // changes per second made
	changes    int
	result     *measure.ChurnResult // Analyze, once measured
}

// analyze judges the churn's log against the probing node's syncs (once).
func (c *churnRun) analyze() measure.ChurnResult {
	if c.result == nil {
		res := c.log.Analyze(c.proxy.Records())
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
func (c *ChurnStep) runMixed(ctx context.Context, s *Session) (err error) {
	sy := &s.synth
	t := sy.template
	base := sy.count
	if base == 0 {
		return fmt.Errorf("churn mixed: no synthetic services yet (add some first)")
	}
	if t.EndpointsPerService >= len(sy.pods) {
		return fmt.Errorf("churn mixed: %d endpoints per service leave no spare pod to move an endpoint to (at most %d)", t.EndpointsPerService, len(sy.pods)-1)
	}
	podName := podNames(s.Cluster)
	names := make([]string, len(sy.pods))
	for k, b := range sy.pods {
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
	for _, svc := range s.Cluster.Services() {
		if svc.Namespace == synth.Namespace {
			if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
				ips[svc.Name] = ip
			}
		}
	}
	gens := maps.Clone(sy.gen)
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
		for _, px := range s.Cluster.Proxies() {
			if px.Node() == node {
				run.proxy = px
			}
		}
		h, ok := s.Cluster.Host(s.Cluster.ProbeHost(node))
		if run.proxy == nil || !ok {
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
		pr, err := s.Cluster.NewProber(h.Name, o.Workers)
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
		i := sy.next % min(base, c.Services)
		sy.next++
		old := sy.gen[i]
		sy.gen[i]++
		at := time.Now()
		if err := s.Cluster.Apply(ctx, annotate(synth.Slice(i, sy.gen[i], t, sy.pods), at)); err != nil {
			return err
		}
		if log != nil {
			rv := s.Cluster.ResourceVersion()
			pods := podsOf(i, sy.gen[i])
			log.Baseline(key(i), target(synth.Name(i)), podsOf(i, old))
			log.Record(measure.Change{Kind: measure.ChangeEndpoint, Service: key(i), Trigger: at, RV: rv, Pods: pods, NewPod: pods[len(pods)-1]}, netip.AddrPort{})
		}
		return nil
	}
	add := func(ctx context.Context) error {
		i := nextAdd
		nextAdd++
		at := time.Now()
		objs := []runtime.Object{synth.Service(i, t), annotate(synth.Slice(i, 0, t, sy.pods), at)}
		if err := s.Cluster.Apply(ctx, objs...); err != nil {
			return err
		}
		extras = append(extras, synthExtra{index: i, trigger: at})
		if log != nil {
			rv := s.Cluster.ResourceVersion()
			o, err := s.Cluster.Get(manifest.KindService, synth.Namespace, synth.Name(i))
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
		return at, deleteSynthService(ctx, s.Cluster, i)
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
			log.Record(measure.Change{Kind: measure.ChangeDelete, Service: key(i), Trigger: at, RV: s.Cluster.ResourceVersion()}, netip.AddrPort{})
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
		s.Advance(int(time.Since(run.start)/time.Second), int(c.Duration.Duration/time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	elapsed := time.Since(run.start)
	run.changes, run.achieved = done, float64(done)/elapsed.Seconds()
	if run.achieved < 0.95*c.Rate {
		s.Logf("churn: asked for %.1f changes/s, made %.1f/s (%d in %.1fs): the runner could not keep up", c.Rate, run.achieved, done, elapsed.Seconds())
	}
	stopProber()
	<-proberDone
	run.end = time.Now()
	s.churn = run
	// Leave the Service count as it was: delete what the step added and did not delete.
	var errs []error
	for _, e := range extras {
		_, err := deleteExtra(ctx, e.index)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
