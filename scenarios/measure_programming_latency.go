//go:build linux

package scenarios

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
)

// programmingLatencyMeasurement reports how long changes took to reach the kernel and
// the data plane.
type programmingLatencyMeasurement struct{}

func (programmingLatencyMeasurement) Name() string { return reports.MeasureProgrammingLatency }
func (programmingLatencyMeasurement) Doc() string {
	return "Programming latency, from a change's trigger time (its EndpointSlice's `endpoints.kubernetes.io/last-change-trigger-time`) to the end of the sync that carried it (half `sync`, as kube-proxy measures it) and, after a mixed churn with a prober, to the first probe that saw it (half `dataplane`). Without a probed churn, every change with a trigger time so far on every node. Needs such a change before it: a mixed churn, or pods behind a Service with a selector; the other churn patterns write no trigger time."
}

// Metrics: both halves are gated on their median and p99.
func (programmingLatencyMeasurement) Metrics() []reports.Metric {
	gated := func(match map[string]string, title string) reports.Metric {
		return reports.Metric{Measurement: reports.MeasureProgrammingLatency, Match: match, Title: title, Unit: reports.UnitSeconds,
			Better: reports.LowerIsBetter, Gated: true, Test: reports.TestLocation, MinSamples: 20, Statistics: []string{"p50", "p99"}}
	}
	return []reports.Metric{
		gated(nil, "programming latency"),
		gated(map[string]string{"half": "sync"}, "programming latency (to the end of the sync)"),
		{Measurement: measure.MeasureProgrammingLatencyDataplane, Title: "programming latency (to the first probe that saw it)", Unit: reports.UnitSeconds,
			Better: reports.LowerIsBetter, Gated: true, Test: reports.TestLocation, MinSamples: 20, Statistics: []string{"p50", "p99"}},
	}
}

// Decode reads ProgrammingLatencyParams (none).
func (programmingLatencyMeasurement) Decode(in Input) (Measuring, error) {
	return decodeParams[ProgrammingLatencyParams](in)
}

// ProgrammingLatencyParams are the programming-latency measurement's parameters: none.
type ProgrammingLatencyParams struct{}

// Default does nothing.
func (*ProgrammingLatencyParams) Default() {}

// Validate needs a change with a trigger time before the step.
func (*ProgrammingLatencyParams) Validate(v *Validation, p *field.Path) field.ErrorList {
	if !v.TriggeredChanges {
		return field.ErrorList{field.Forbidden(p.Child("name"), "programming latency is measured from a change's trigger time, and no step before this one makes such a change: churns with pattern add, update or delete (allAtOnce or at a rate) write none; make one with a mixed churn (with a probe for the data-plane half), or change pods behind a Service with a selector")}
	}
	return nil
}

// Measure returns both halves after a probed churn, else the sync half of every change
// so far.
func (*ProgrammingLatencyParams) Measure(_ context.Context, s *Session) ([]reports.Measurement, error) {
	if s.churn != nil && s.churn.log != nil {
		return s.churn.analyze().LatencyMeasurements(s.Labels()), nil
	}
	var proxies []measure.Proxy
	for _, px := range s.Cluster.Proxies() {
		proxies = append(proxies, px)
	}
	m := measure.ProgrammingLatency(proxies, s.Labels())
	if len(m.Samples) == 0 {
		return nil, fmt.Errorf("programming-latency: no change with a trigger time reached a proxy so far")
	}
	return []reports.Measurement{m}, nil
}
