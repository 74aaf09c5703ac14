//go:build linux

package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/reports"
)

// measureKind is the `measure` step kind: it names a registered measurement, whose own
// Decode reads the params.
type measureKind struct{}

func (measureKind) Name() string { return "measure" }
func (measureKind) Role() Role   { return RoleMeasure }
func (measureKind) Doc() string {
	return "Takes a registered measurement (see Measurements below) and records its raw samples in the results; a measurement that yields no sample fails the step. `limits` turn figures into expectations."
}

// Decode decodes the step and, through the registry, the measurement's params.
func (measureKind) Decode(in Input) (Action, error) {
	m := &MeasureStep{}
	if err := in.Decode(m); err != nil {
		return m, err
	}
	doc := in.Doc
	if doc == nil || doc.Node == nil {
		doc = &yamlpos.Doc{}
	}
	if !measureRE.MatchString(m.Name) {
		return m, yamlpos.Errors{doc.Errorf("name", "Invalid value: %q: must be a measurement name: a letter, then letters, digits, '-' or '_' (at most 63)", m.Name)}
	}
	meas, ok := in.Registry.Measurement(m.Name)
	if !ok {
		return m, yamlpos.Errors{doc.Errorf("name", "%s", unknown("measurement", m.Name, in.Registry.MeasurementNames()))}
	}
	params := &yamlpos.Doc{File: doc.File, Node: m.Params, Base: doc.Base.Child("params")}
	measuring, err := meas.Decode(Input{Doc: params, Registry: in.Registry, Shared: in.Shared})
	m.measurement, m.Measuring = meas, measuring
	return m, err
}

// MeasureStep runs a named measurement.
type MeasureStep struct {
	// Name of the measurement (registered: sync, lookup, distribution, rules, ...).
	Name string `json:"name"`
	// Params are the measurement's parameters, decoded strictly by the measurement.
	Params *yaml.Node `json:"params,omitempty"`
	// Limits turn measurements into expectations: the step fails when a measurement it
	// produced, named by the key (e.g. churn-misroutes), has a sample above the value.
	// Each limit is a case in the results, pass or fail; a limit must name a figure the
	// measurement declares.
	Limits map[string]float64 `json:"limits,omitempty"`
	// Informational declares every figure of the step shown and never gated, with the
	// reason, for figures whose verdict needs more samples than the scenario's budget
	// allows (a full sync at 10,000 Services taken once): compare and gates do not judge
	// them and say so, reports mark them. Results carry it in each figure.
	Informational string `json:"informational,omitempty"`

	// Measuring is the measurement with its decoded params. Set by Load.
	Measuring Measuring `json:"-"`

	measurement Measurement
}

// Measurement returns the registered measurement the step names (nil before Load).
func (m *MeasureStep) Measurement() Measurement { return m.measurement }

// Default defaults the measurement's params.
func (m *MeasureStep) Default() {
	if m.Measuring != nil {
		m.Measuring.Default()
	}
}

// Validate checks the limits against what the measurement declares, and the params
// against the scenario at this step.
func (m *MeasureStep) Validate(v *Validation, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	var declared []string
	if m.measurement != nil {
		for _, f := range m.measurement.Metrics() {
			if !slices.Contains(declared, f.Measurement) {
				declared = append(declared, f.Measurement)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Limits)) {
		lp := p.Child("limits").Key(k)
		switch {
		case !measureRE.MatchString(k):
			errs = append(errs, field.Invalid(lp, k, "must be a measurement name"))
		case m.measurement != nil && !slices.Contains(declared, k):
			errs = append(errs, field.NotSupported(lp, k, declared))
		}
		if val := m.Limits[k]; val < 0 || math.IsNaN(val) || math.IsInf(val, 0) {
			errs = append(errs, field.Invalid(lp, strconv.FormatFloat(val, 'g', -1, 64), "must be a finite number >= 0"))
		}
	}
	if m.Measuring != nil {
		errs = append(errs, m.Measuring.Validate(v, p)...)
	}
	return errs
}

// Run takes the measurement, records what it measured, and checks the limits. A
// measurement that yields nothing, or a figure without samples, fails the step.
func (m *MeasureStep) Run(ctx context.Context, s *Session) error {
	ms, err := m.Measuring.Measure(ctx, s)
	for i := range ms {
		ms[i].Informational = m.Informational
	}
	rerr := s.Record(ms...) // what was measured is kept, even when the measurement failed
	if errors.Is(err, ErrUnmet) && len(ms) > 0 && rerr == nil {
		// The measurement judged what it measured (the churn's bounds): its verdict is a
		// case, and the limits are checked as well.
		s.RecordCase(reports.Case{Result: reports.CaseFail, Reason: err.Error()})
		return errors.Join(err, m.checkLimits(s, ms))
	}
	if err != nil {
		return errors.Join(err, rerr)
	}
	if len(ms) == 0 {
		return fmt.Errorf("measure %s produced nothing", m.Name)
	}
	if rerr != nil {
		return fmt.Errorf("measure %s: %w", m.Name, rerr)
	}
	return m.checkLimits(s, ms)
}

// prepare lets a measurement read what it needs before the lab is built.
func (m *MeasureStep) prepare(ctx context.Context, s *Session) {
	if p, ok := m.Measuring.(labPreparer); ok {
		p.prepare(ctx, s)
	}
}

// labPreparer is a measurement that reads something before the lab exists (the rules
// measurement's kernel memory baseline).
type labPreparer interface {
	prepare(ctx context.Context, s *Session)
}

// evidencer is a measurement with examples to show beside a limit's case (the churn's
// misroutes and false refusals).
type evidencer interface {
	evidence(s *Session, metric string) []string
}

// checkLimits records a case per limit over the measurements the step produced, and
// fails when any is exceeded.
func (m *MeasureStep) checkLimits(s *Session, out []reports.Measurement) error {
	var errs []error
	allMeasured := true // every failed limit has a figure: the failure is the verdict
	for _, name := range slices.Sorted(maps.Keys(m.Limits)) {
		limit := m.Limits[name]
		c := reports.Case{Name: fmt.Sprintf("%s <= %s", name, strconv.FormatFloat(limit, 'g', -1, 64)), Result: reports.CasePass}
		found, worst := false, 0.0
		for _, mm := range out {
			if mm.Name != name {
				continue
			}
			for _, v := range mm.Samples {
				if !found || v > worst {
					worst = v
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
			if e, ok := m.Measuring.(evidencer); ok {
				for _, ex := range e.evidence(s, name) {
					c.Evidence += "\n" + ex
				}
			}
		}
		if c.Result == reports.CaseFail {
			errs = append(errs, errors.New(c.Reason))
			allMeasured = allMeasured && found
		}
		s.RecordCase(c)
	}
	if allMeasured {
		return unmet(errors.Join(errs...))
	}
	return errors.Join(errs...)
}
