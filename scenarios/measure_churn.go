//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
)

// ChurnParams are the churn measurement's parameters: the bounds of its prober's verdict
// (measure.ChurnBounds), checked whatever the limits say.
type ChurnParams struct {
	// MinLiveProbes is the fewest probes of live Services the verdict needs (default: one
	// per change the churn made).
	MinLiveProbes *int `json:"minLiveProbes,omitempty"`
	// MaxFailedShare bounds the share of the probes of live Services that time out or
	// are reset, 0-1 (default DefaultChurnMaxFailedShare).
	MaxFailedShare *float64 `json:"maxFailedShare,omitempty"`
}

// DefaultChurnMaxFailedShare is ChurnParams.MaxFailedShare's default: 1% of the probes of
// live Services may time out (churn-small here: 0.04-0.09% at a 100 ms probe timeout; a
// backend that drops a tenth of the Services' traffic: about 10%).
const DefaultChurnMaxFailedShare = 0.01

// Default sets the failed share's bound (the probes' is set at run time, from the
// churn's changes).
func (p *ChurnParams) Default() {
	if p.MaxFailedShare == nil {
		v := DefaultChurnMaxFailedShare
		p.MaxFailedShare = &v
	}
}

// Validate needs a mixed churn with a prober before the step, and bounds in range.
func (p *ChurnParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !v.ProbedChurn {
		errs = append(errs, field.Forbidden(path.Child("name"), "the churn measurement reads the prober of a mixed churn, and no step before this one runs one: add `churn: {pattern: mixed, ..., probe: {}}`"))
	}
	if p.MinLiveProbes != nil && *p.MinLiveProbes < 0 {
		errs = append(errs, field.Invalid(path.Child("params", "minLiveProbes"), *p.MinLiveProbes, "must be >= 0"))
	}
	if f := p.MaxFailedShare; f != nil && !(*f >= 0 && *f <= 1) {
		errs = append(errs, field.Invalid(path.Child("params", "maxFailedShare"), *f, "must be in range 0-1"))
	}
	return errs
}

// bounds are the churn's bounds for c.
func (p *ChurnParams) bounds(c *churnRun) measure.ChurnBounds {
	b := measure.ChurnBounds{MinLiveProbes: c.changes, MaxFailedShare: DefaultChurnMaxFailedShare}
	if p.MinLiveProbes != nil {
		b.MinLiveProbes = *p.MinLiveProbes
	}
	if p.MaxFailedShare != nil {
		b.MaxFailedShare = *p.MaxFailedShare
	}
	return b
}

// Measure analyses the last probed churn. Beyond its bounds it returns its figures and
// its verdict (ErrUnmet).
func (p *ChurnParams) Measure(_ context.Context, s *Session) ([]reports.Measurement, error) {
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
		kp := maps.Clone(labels)
		kp["kind"] = k.kind
		out = append(out, reports.Measurement{Name: reports.MeasureChurnSync, Params: kp, Unit: reports.UnitSeconds, Samples: k.samples})
	}
	if err := res.Check(p.bounds(c)); err != nil {
		return out, unmet(fmt.Errorf("churn: %w", err))
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
