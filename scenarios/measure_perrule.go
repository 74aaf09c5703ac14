//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/reports"
)

// perRuleMeasurement times each rule of one more Service, one iptables call each.
type perRuleMeasurement struct{}

func (perRuleMeasurement) Name() string { return reports.MeasurePerRule }
func (perRuleMeasurement) Doc() string {
	return "Adds one more generated Service and times each of its rules, one iptables call each, at the table's current size (the 2017 curve; backends with per-rule timings only: iptables-perrule)."
}

// Metrics: the per-rule times describe a curve; they are not gated.
func (perRuleMeasurement) Metrics() []reports.Metric {
	return []reports.Metric{{Measurement: reports.MeasurePerRule, Title: "time to add one rule", Unit: reports.UnitSeconds, Better: reports.LowerIsBetter}}
}

// Decode reads PerRuleParams (none).
func (perRuleMeasurement) Decode(in Input) (Measuring, error) { return decodeParams[PerRuleParams](in) }

// PerRuleParams are the perrule measurement's parameters: none.
type PerRuleParams struct{}

// Default does nothing.
func (*PerRuleParams) Default() {}

// Validate needs backends with per-rule timings; the step adds a generated Service.
func (*PerRuleParams) Validate(v *Validation, p *field.Path) field.ErrorList {
	v.SyntheticServices++
	return v.RequireCapability(CapabilityPerRuleTimings, p.Child("name"), "perrule")
}

// Measure adds the Service and reports each rule's time.
func (*PerRuleParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	proxies := s.Cluster.Proxies()
	if len(proxies) == 0 {
		return nil, fmt.Errorf("perrule: the cluster has no proxy")
	}
	labels := s.Labels() // the table's size before the Service is added
	rt, ok := all.RuleTimerOf(proxies[0].Backend())
	if !ok {
		return nil, fmt.Errorf("perrule: backend %s adds rules in bulk; use iptables-perrule", s.Backend)
	}
	add := &ChurnStep{Pattern: "add", Services: 1, EndpointsPerService: max(1, s.synth.template.EndpointsPerService), AllAtOnce: true}
	if err := add.Run(ctx, s); err != nil {
		return nil, err
	}
	if err := s.Cluster.WaitSynced(ctx); err != nil {
		return nil, err
	}
	timings := rt.RuleTimings() // of the last sync: the one that added the service
	if len(timings) == 0 {
		return nil, fmt.Errorf("perrule: adding a service added no rule")
	}
	m := reports.Measurement{Name: reports.MeasurePerRule, Params: labels, Unit: reports.UnitSeconds,
		Extra: map[string]float64{"rules_added": float64(len(timings))}}
	m.Params["base"] = strconv.Itoa(timings[0].TableRules)
	var total time.Duration
	for _, t := range timings {
		m.Samples = append(m.Samples, t.Duration.Seconds())
		total += t.Duration
	}
	m.Extra["service_add_seconds"] = total.Seconds()
	return []reports.Measurement{m}, nil
}
