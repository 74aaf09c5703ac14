//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
)

// PerRuleParams are the perrule measurement's parameters.
type PerRuleParams struct {
	// Prefill grows the generated Services to this many first, with one iptables-restore
	// (0: the table as it is). Must not be below the Services generated so far.
	Prefill int `json:"prefill,omitempty"`
	// Adds is how many Services are then added one rule at a time (default 1).
	Adds int `json:"adds,omitempty"`
	// Restores, when above 0, times this many full and this many partial
	// iptables-restore syncs of the table before the additions.
	Restores int `json:"restores,omitempty"`
}

// Default sets one addition.
func (p *PerRuleParams) Default() {
	setDefault(&p.Adds, 1)
}

// Validate needs backends with per-rule timings and bounded counts; the step adds
// generated Services.
func (p *PerRuleParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	pp := path.Child("params")
	errs := intRange(pp.Child("adds"), p.Adds, 1, 100)
	errs = append(errs, intRange(pp.Child("restores"), p.Restores, 0, 100)...)
	errs = append(errs, intRange(pp.Child("prefill"), p.Prefill, 0, 100000)...)
	if p.Prefill > 0 && p.Prefill < v.SyntheticServices {
		errs = append(errs, field.Invalid(pp.Child("prefill"), p.Prefill, fmt.Sprintf("the table already holds %d generated Services at this step: a prefill only grows it", v.SyntheticServices)))
	}
	v.SyntheticServices = max(v.SyntheticServices, p.Prefill) + p.Adds
	return append(errs, v.RequireCapability(CapabilityPerRuleTimings, path.Child("name"), "perrule")...)
}

// Measure prefills, times the restores, then adds the Services rule by rule.
func (p *PerRuleParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	proxies := s.Cluster.Proxies()
	if len(proxies) == 0 {
		return nil, fmt.Errorf("perrule: the cluster has no proxy")
	}
	rt, ok := all.RuleTimerOf(proxies[0].Backend())
	if !ok {
		return nil, fmt.Errorf("perrule: backend %s adds rules in bulk; use iptables-perrule", s.Backend)
	}
	eps := max(1, s.synth.template.EndpointsPerService)
	if s.synth.template.EndpointsPerService == 0 {
		eps = 2
	}
	var out []reports.Measurement
	if err := func() error {
		rt.SetBulk(true)
		defer rt.SetBulk(false)
		if grow := p.Prefill - s.synth.count; grow > 0 {
			s.Logf("%s: prefilling to %d Services with one iptables-restore", s.StepName(), p.Prefill)
			add := &ChurnStep{Pattern: "add", Services: grow, EndpointsPerService: eps, AllAtOnce: true}
			if err := add.Run(ctx, s); err != nil {
				return fmt.Errorf("perrule: prefill: %w", err)
			}
			if err := s.Cluster.WaitSynced(ctx); err != nil {
				return fmt.Errorf("perrule: prefill: %w", err)
			}
		}
		if p.Restores == 0 {
			return nil
		}
		for _, full := range []bool{true, false} {
			ms, err := measure.Sync(ctx, proxies[0], full, p.Restores, func(ctx context.Context, i int) error {
				return s.changeOne(ctx, nil)
			}, nil, s.Labels())
			if err != nil {
				return fmt.Errorf("perrule: restore sync: %w", err)
			}
			m := ms[0] // the sync's wall time
			m.Name = reports.MeasurePerRuleRestore
			out = append(out, m)
		}
		return nil
	}(); err != nil {
		return nil, err
	}
	labels := s.Labels() // the table's size before the first per-rule Service
	rules := reports.Measurement{Name: reports.MeasurePerRule, Params: s.Labels(), Unit: reports.UnitSeconds}
	service := reports.Measurement{Name: reports.MeasurePerRuleService, Params: labels, Unit: reports.UnitSeconds, Extra: map[string]float64{}}
	for i := range p.Adds {
		s.Advance(i, p.Adds)
		added, err := measure.AddService(ctx, proxies[0], rt, func(ctx context.Context) error {
			add := &ChurnStep{Pattern: "add", Services: 1, EndpointsPerService: eps, AllAtOnce: true}
			if err := add.Run(ctx, s); err != nil {
				return err
			}
			return s.Cluster.WaitSynced(ctx)
		})
		if err != nil {
			return nil, fmt.Errorf("perrule: %w", err)
		}
		timings := added.Rules
		if i == 0 {
			rules.Params["base"] = strconv.Itoa(timings[0].TableRules)
			service.Extra["rules_added"] = float64(len(timings))
			service.Extra["table_rules"] = float64(timings[0].TableRules)
		}
		for _, t := range timings {
			rules.Samples = append(rules.Samples, t.Duration.Seconds())
		}
		service.Samples = append(service.Samples, added.Wall().Seconds())
	}
	s.Advance(p.Adds, p.Adds)
	return append(out, rules, service), nil
}

// changeOne changes one generated Service's endpoints and waits until it is programmed
// (a partial sync's change); applied, when set, runs between the write and the wait.
func (s *Session) changeOne(ctx context.Context, applied func()) error {
	sy := &s.synth
	if sy.count == 0 {
		return fmt.Errorf("a partial sync needs generated services (a churn step) to change")
	}
	k := sy.count / 2
	sy.gen[k]++
	if err := s.Cluster.Apply(ctx, synth.Slice(k, sy.gen[k], sy.template, sy.pods)); err != nil {
		return err
	}
	if applied != nil {
		applied()
	}
	return s.Cluster.WaitSynced(ctx)
}
