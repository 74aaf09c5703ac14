//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/manifest"
	"kpbench.dev/kpbench/scenarios/synth"
)

// ChurnStep generates Service and endpoint changes, to measure how the proxy keeps up.
type ChurnStep struct {
	// Pattern is what happens: "add" creates Services, "update" keeps replacing
	// endpoints of the churned Services for Duration, "delete" removes them, "mixed"
	// cycles for Duration through the three kinds of change a live cluster makes: one
	// endpoint of a Service replaced in its slice, a Service added, a Service (one this
	// step added a while before) deleted; the extra Services left at the end are deleted,
	// so the Service count is the same after the step as before.
	Pattern string `json:"pattern"`
	// Services is how many Services are created, updated or deleted (1-50000). The update
	// and mixed patterns change the first Services of the ones that exist.
	Services int `json:"services"`
	// EndpointsPerService is the number of endpoints each Service gets (0-10: the
	// generated Services share SyntheticPods pods; 0: 2).
	EndpointsPerService int `json:"endpointsPerService,omitempty"`
	// Template is the shape of the generated Services.
	Template ChurnTemplate `json:"template,omitempty"`
	// Rate is the number of changes per second. Exactly one of Rate and AllAtOnce. It is
	// a contract: the step's results record the rate achieved (churn-rate), so a runner
	// that could not keep up says so.
	Rate float64 `json:"rate,omitempty"`
	// AllAtOnce makes every change at once (one big sync).
	AllAtOnce bool `json:"allAtOnce,omitempty"`
	// Duration is how long the "update" and "mixed" patterns run (required for them,
	// forbidden otherwise).
	Duration *Duration `json:"duration,omitempty"`
	// Probe, when set, runs a prober while the step churns (mixed pattern only), to time
	// each change's arrival in the data plane and to check that traffic never reaches a
	// removed endpoint nor is refused by a live Service. Measure programming-latency and
	// churn afterwards to report it.
	Probe *ChurnProbe `json:"probe,omitempty"`
}

// ChurnProbe is the prober of a churn step: a fixed pool of workers, each probing one
// Service's ClusterIP at a time from a node's probe pod: the Services whose change it
// waits to see first, else recently changed ones, else any live one at random.
type ChurnProbe struct {
	// Node is the node whose probe pod sends the probes (default node-0). Its proxy's
	// syncs are the ones the probes are judged against.
	Node string `json:"node,omitempty"`
	// Workers is the number of probes in flight (default 8, 1-64).
	Workers int `json:"workers,omitempty"`
	// Interval is each worker's pause between two probes (default 10ms, at most 1s).
	Interval *Duration `json:"interval,omitempty"`
	// Timeout bounds one probe (default 500ms, at most 5s): a probe that times out
	// counts as not answered.
	Timeout *Duration `json:"timeout,omitempty"`
	// Deadline is how long the prober waits to see a change in the data plane (default
	// 30s, at most 10m); the prober keeps running after the last change until every
	// change is seen or past its deadline.
	Deadline *Duration `json:"deadline,omitempty"`
}

// ChurnTemplate is the shape of the Services a churn step generates.
type ChurnTemplate struct {
	// Port of every generated Service (default 80).
	Port int32 `json:"port,omitempty"`
	// Protocol TCP, UDP or SCTP (default TCP).
	Protocol string `json:"protocol,omitempty"`
	// Type ClusterIP, NodePort or LoadBalancer (default ClusterIP).
	Type string `json:"type,omitempty"`
}

// Default sets the template's port (80), protocol (TCP) and type (ClusterIP).
func (c *ChurnStep) Default() {
	tp := &c.Template
	setDefault(&tp.Port, DefaultChurnPort)
	setDefault(&tp.Protocol, "TCP")
	setDefault(&tp.Type, "ClusterIP")
}

// Validate checks the pattern's fields, and that the Services it changes exist at this
// step; it records the generated Services the step leaves.
func (c *ChurnStep) Validate(v *Validation, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch c.Pattern {
	case "add", "update", "delete", "mixed":
	default:
		errs = append(errs, field.NotSupported(p.Child("pattern"), c.Pattern, []string{"add", "update", "delete", "mixed"}))
	}
	if c.Services < 1 || c.Services > MaxChurnServices {
		errs = append(errs, field.Invalid(p.Child("services"), c.Services, fmt.Sprintf("must be in range 1-%d", MaxChurnServices)))
	}
	if c.EndpointsPerService < 0 || c.EndpointsPerService > MaxEndpointsPerService {
		errs = append(errs, field.Invalid(p.Child("endpointsPerService"), c.EndpointsPerService, fmt.Sprintf("must be in range 0-%d (the generated Services share %d pods)", MaxEndpointsPerService, SyntheticPods)))
	} else if c.Pattern == "mixed" && c.EndpointsPerService >= SyntheticPods {
		errs = append(errs, field.Invalid(p.Child("endpointsPerService"), c.EndpointsPerService, fmt.Sprintf("the mixed pattern moves an endpoint to a spare pod: at most %d", SyntheticPods-1)))
	}
	switch {
	case c.AllAtOnce && c.Rate != 0:
		errs = append(errs, field.Forbidden(p.Child("rate"), "set either rate or allAtOnce, not both"))
	case !c.AllAtOnce && c.Rate == 0:
		errs = append(errs, field.Required(p.Child("rate"), "changes per second (or allAtOnce: true)"))
	case c.Rate < 0 || c.Rate > 1e6:
		errs = append(errs, field.Invalid(p.Child("rate"), strconv.FormatFloat(c.Rate, 'g', -1, 64), "must be in range (0, 1000000] changes per second"))
	}
	timed := c.Pattern == "update" || c.Pattern == "mixed"
	switch {
	case timed && c.Duration == nil:
		errs = append(errs, field.Required(p.Child("duration"), fmt.Sprintf("how long the %s pattern runs, e.g. \"30s\"", c.Pattern)))
	case !timed && c.Duration != nil:
		errs = append(errs, field.Forbidden(p.Child("duration"), "only the update and mixed patterns run for a duration"))
	}
	if c.Pattern == "mixed" && c.AllAtOnce {
		errs = append(errs, field.Forbidden(p.Child("allAtOnce"), "the mixed pattern runs at a rate"))
	}
	if c.Probe != nil {
		errs = append(errs, validateChurnProbe(c, p.Child("probe"))...)
	}
	errs = append(errs, validateDuration(c.Duration, p.Child("duration"))...)
	tp := p.Child("template")
	if c.Template.Port < 1 || c.Template.Port > 65535 {
		errs = append(errs, field.Invalid(tp.Child("port"), c.Template.Port, "must be in range 1-65535"))
	}
	errs = append(errs, validateProtocol(c.Template.Protocol, tp.Child("protocol"))...)
	switch c.Template.Type {
	case "ClusterIP", "NodePort", "LoadBalancer":
	default:
		errs = append(errs, field.NotSupported(tp.Child("type"), c.Template.Type, []string{"ClusterIP", "NodePort", "LoadBalancer"}))
	}
	switch c.Pattern {
	case "add":
		v.SyntheticServices += c.Services
	case "update", "mixed", "delete":
		if v.SyntheticServices == 0 {
			errs = append(errs, field.Invalid(p.Child("pattern"), c.Pattern, "no generated Services exist at this step: add some first (a churn with pattern add)"))
		}
		if c.Pattern == "delete" {
			v.SyntheticServices -= min(c.Services, v.SyntheticServices)
		}
	}
	if c.Pattern == "mixed" {
		v.TriggeredChanges = true // its slices carry trigger times
		v.ProbedChurn = v.ProbedChurn || c.Probe != nil
	}
	return errs
}

// Bounds of a churn step's prober.
const (
	MaxChurnProbeWorkers  = 64
	MaxChurnProbeInterval = time.Second
	MaxChurnProbeTimeout  = 5 * time.Second
	MaxChurnProbeDeadline = 10 * time.Minute
)

func validateChurnProbe(c *ChurnStep, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	pr := c.Probe
	if c.Pattern != "mixed" {
		errs = append(errs, field.Forbidden(p, "only the mixed pattern runs a prober"))
	}
	if pr.Node != "" {
		if m := hostRE.FindStringSubmatch(pr.Node); m == nil || m[1] != "node" {
			errs = append(errs, field.Invalid(p.Child("node"), pr.Node, "must be node-N"))
		}
	}
	if pr.Workers < 0 || pr.Workers > MaxChurnProbeWorkers {
		errs = append(errs, field.Invalid(p.Child("workers"), pr.Workers, fmt.Sprintf("must be in range 1-%d (0: the default 8)", MaxChurnProbeWorkers)))
	}
	bound := func(name string, d *Duration, most time.Duration) {
		errs = append(errs, validateDuration(d, p.Child(name))...)
		if d != nil && d.Duration > most {
			errs = append(errs, field.Invalid(p.Child(name), d.String(), fmt.Sprintf("must be at most %s", most)))
		}
	}
	bound("interval", pr.Interval, MaxChurnProbeInterval)
	bound("timeout", pr.Timeout, MaxChurnProbeTimeout)
	bound("deadline", pr.Deadline, MaxChurnProbeDeadline)
	return errs
}

// Run makes the step's changes: at once, or at the rate for the duration (update) or
// until every change is made (add, delete). The mixed pattern is churn_mixed.go.
func (c *ChurnStep) Run(ctx context.Context, s *Session) error {
	if err := s.ensureSynthPods(ctx); err != nil {
		return err
	}
	t := synth.Template{Port: c.Template.Port, Protocol: corev1.Protocol(c.Template.Protocol), Type: corev1.ServiceType(c.Template.Type), EndpointsPerService: c.EndpointsPerService}
	if t.EndpointsPerService > len(s.synth.pods) {
		return fmt.Errorf("churn: %d endpoints per service, but the generated services share %d pods", t.EndpointsPerService, len(s.synth.pods))
	}
	s.synth.template = t
	if c.Pattern == "mixed" {
		return c.runMixed(ctx, s)
	}
	sy := &s.synth
	var total int
	var change func(k int) ([]runtime.Object, error) // the objects of change k
	var deleteOne func(ctx context.Context) error
	switch c.Pattern {
	case "add":
		first := sy.count
		total = c.Services
		change = func(k int) ([]runtime.Object, error) {
			return synth.Services(first+k, first+k+1, t, sy.pods)
		}
	case "update":
		if sy.count == 0 {
			return fmt.Errorf("churn update: no generated services yet (add some first)")
		}
		change = func(int) ([]runtime.Object, error) {
			i := sy.next % min(sy.count, c.Services)
			sy.next++
			sy.gen[i]++
			return []runtime.Object{synth.Slice(i, sy.gen[i], t, sy.pods)}, nil
		}
		total = -1 // bounded by Duration
	case "delete":
		total = min(c.Services, sy.count)
		deleteOne = func(ctx context.Context) error {
			if err := deleteSynthService(ctx, s.Cluster, sy.count-1); err != nil {
				return err
			}
			sy.count--
			return nil
		}
	default:
		return fmt.Errorf("churn: unknown pattern %q", c.Pattern)
	}
	apply := func(ctx context.Context, k, n int) error {
		if deleteOne != nil {
			for range n {
				if err := deleteOne(ctx); err != nil {
					return err
				}
			}
			return nil
		}
		var objs []runtime.Object
		for j := range n {
			o, err := change(k + j)
			if err != nil {
				return err
			}
			objs = append(objs, o...)
		}
		if err := s.Cluster.Apply(ctx, objs...); err != nil {
			return err
		}
		if c.Pattern == "add" {
			sy.count += n
		}
		return nil
	}
	if c.AllAtOnce {
		if total < 0 {
			total = c.Services
		}
		return apply(ctx, 0, total)
	}
	// At a rate: batches every 100 ms, for Duration (update) or until total changes.
	deadline := time.Time{}
	if c.Duration != nil {
		deadline = time.Now().Add(c.Duration.Duration)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start, done := time.Now(), 0
	for {
		if total >= 0 && done >= total {
			return nil
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return nil
		}
		due := int(c.Rate*time.Since(start).Seconds()) - done
		if total >= 0 {
			due = min(due, total-done)
		}
		if due > 0 {
			if err := apply(ctx, done, due); err != nil {
				return err
			}
			done += due
			s.Advance(done, max(total, 0))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// deleteSynthService deletes generated Service i and its slice.
func deleteSynthService(ctx context.Context, c cluster.Cluster, i int) error {
	if err := c.Delete(ctx, manifest.KindEndpointSlice, synth.Namespace, synth.Name(i)+"-synth"); err != nil {
		return err
	}
	return c.Delete(ctx, manifest.KindService, synth.Namespace, synth.Name(i))
}
