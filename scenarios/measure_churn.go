//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
)

// churnMeasurement reports the correctness, rate and syncs of the last probed churn.
type churnMeasurement struct{}

func (churnMeasurement) Name() string { return "churn" }
func (churnMeasurement) Doc() string {
	return "What the last mixed churn with a prober saw: misroutes (connections to an endpoint a finished sync had removed), false refusals (a live Service refusing), other probe failures, the change rate achieved, and the probing node's syncs during the churn. Use `limits` to require 0 misroutes and 0 false refusals."
}

// Metrics: churn figures are checked by limits, not by compare.
func (churnMeasurement) Metrics() []reports.Metric {
	return reports.MetricsOf(reports.MeasureChurnMisroutes, reports.MeasureChurnFalseRefusals, reports.MeasureChurnProbeFailures,
		reports.MeasureChurnRate, reports.MeasureChurnSync)
}

// Decode reads ChurnParams (none).
func (churnMeasurement) Decode(in Input) (Measuring, error) { return decodeParams[ChurnParams](in) }

// ChurnParams are the churn measurement's parameters: none.
type ChurnParams struct{}

// Default does nothing.
func (*ChurnParams) Default() {}

// Validate needs a mixed churn with a prober before the step.
func (*ChurnParams) Validate(v *Validation, p *field.Path) field.ErrorList {
	if !v.ProbedChurn {
		return field.ErrorList{field.Forbidden(p.Child("name"), "the churn measurement reads the prober of a mixed churn, and no step before this one runs one: add `churn: {pattern: mixed, ..., probe: {}}`")}
	}
	return nil
}

// Measure analyses the last probed churn.
func (*ChurnParams) Measure(_ context.Context, s *Session) ([]reports.Measurement, error) {
	c := s.churn
	if c == nil || c.log == nil {
		return nil, fmt.Errorf("churn: needs a mixed churn step with a probe before it")
	}
	labels := s.Labels()
	res := c.analyze()
	out := res.CorrectnessMeasurements(labels)
	out = append(out, reports.Measurement{Name: reports.MeasureChurnRate, Params: maps.Clone(labels), Unit: reports.UnitPerSecond,
		Samples: []float64{c.achieved}, Extra: map[string]float64{"target": c.target, "changes": float64(c.changes)}})
	var full, partial []float64
	for _, rec := range c.proxy.Records() {
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
			continue // a kind of sync that did not happen: absent, not empty
		}
		p := maps.Clone(labels)
		p["kind"] = k.kind
		out = append(out, reports.Measurement{Name: reports.MeasureChurnSync, Params: p, Unit: reports.UnitSeconds, Samples: k.samples})
	}
	return out, nil
}

// evidence returns the churn's examples for a limit on one of its figures.
func (*ChurnParams) evidence(s *Session, metric string) []string {
	if s.churn == nil || s.churn.result == nil || !strings.HasPrefix(metric, "churn-") {
		return nil
	}
	return s.churn.result.Examples
}
