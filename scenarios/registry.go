//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/internal/yamlpos"
	"kpbench.dev/kpbench/reports"
)

// A scenario's steps are plug-ins: each kind of step (`apply`, `wait`, `measure`, ...) and
// each measurement (`sync`, `lookup`, ...) is one file of typed fields implementing one
// small interface, declared (name, documentation, ...) in shipped.go and registered by name
// in a Registry. Loading, validation, running, diff-rules and the format's documentation
// (docs/scenario-format.md) all read the registry; nothing else knows the names.

// Role says what a step does to a run, for commands that run part of a scenario
// (diff-rules applies the changes up to the first expectation).
type Role string

// Roles of step kinds.
const (
	// RoleChange changes the cluster's objects (apply, delete, scale, setPods, churn).
	RoleChange Role = "change"
	// RoleWait waits (wait).
	RoleWait Role = "wait"
	// RoleExpect probes and judges (expect).
	RoleExpect Role = "expect"
	// RoleMeasure measures (measure).
	RoleMeasure Role = "measure"
)

// StepKind is one kind of scenario step: the key a step is written with
// (`- wait: {synced: true}`) and how its value decodes.
type StepKind interface {
	// Name is the key of the step in a scenario file ("apply").
	Name() string
	// Doc describes the step, for the format's documentation.
	Doc() string
	// Role says what the step does to a run.
	Role() Role
	// Decode decodes the step's value strictly into its typed action. It returns the
	// action (possibly partly decoded) even with an error.
	Decode(in Input) (Action, error)
}

// Action is one decoded step: its typed fields, their defaults, their validation against
// the scenario, and what the step does.
type Action interface {
	// Default fills the unset fields with their defaults (idempotent, no I/O).
	Default()
	// Validate checks the step against the scenario as the steps before it leave it, and
	// records in v what the step changes. p is the path of the step's value
	// ("steps[3].churn"); errors are relative to the scenario file.
	Validate(v *Validation, p *field.Path) field.ErrorList
	// Run performs the step in a session. A step that records a case of its own (an
	// expectation, a measurement's limits) records it through the session.
	Run(ctx context.Context, s *Session) error
}

// Measurement is one named measurement, run by a `measure` step:
// `- measure: {name: sync, params: {kind: full, repeats: 5}}`.
type Measurement interface {
	// Name is the measurement's name in a scenario file ("sync").
	Name() string
	// Doc describes what it measures, for the format's documentation.
	Doc() string
	// Metrics declares every measurement (reports.Measurement.Name) it records: unit,
	// better direction, gated or informational, the samples a verdict needs.
	Metrics() []reports.Metric
	// Decode decodes the step's params (in.Doc.Node is nil when there are none) strictly
	// into the measurement's typed parameters. It returns them (possibly partly
	// decoded) even with an error.
	Decode(in Input) (Measuring, error)
}

// Measuring is a measurement with its decoded parameters, ready to validate and take.
type Measuring interface {
	// Default fills the unset parameters with their defaults (idempotent, no I/O).
	Default()
	// Validate checks the parameters against the scenario as the steps before leave it:
	// a measurement that cannot produce a sample there is an error. p is the measure
	// step's path ("steps[4].measure"): parameters are under p.Child("params"), and an
	// error about the measurement as a whole names p.Child("name").
	Validate(v *Validation, p *field.Path) field.ErrorList
	// Measure takes the measurement in a session and returns what it measured. The step
	// records each result (one without samples fails the step) and checks its limits.
	Measure(ctx context.Context, s *Session) ([]reports.Measurement, error)
}

// Input is a value being decoded: a step's value or a measurement's params.
type Input struct {
	// Doc is the value with its position (Doc.Node is nil when no value was given; Doc.Base
	// is the value's path in the file).
	Doc *yamlpos.Doc
	// Registry is the registry decoding the scenario, for values that name other
	// registered things (a measure step names a measurement).
	Registry *Registry
	// Shared is shared by every decode of the scenario file (one work budget, one cache;
	// nil: a decode of its own).
	Shared *yamlpos.Shared
}

// Decode decodes the value strictly into v (a pointer to a struct); an absent value
// leaves v as it is.
func (in Input) Decode(v any) error {
	if in.Doc == nil || in.Doc.Node == nil {
		return nil
	}
	return yamlpos.Decoder{Shared: in.Shared}.Decode(in.Doc, v)
}

// Registry holds the step kinds and measurements a scenario may use, by name, and the
// metrics a run records by itself. Build one with NewRegistry (empty) or DefaultRegistry
// (everything kpbench ships); it is not changed after it is built and then safe to share.
type Registry struct {
	steps        map[string]StepKind
	measurements map[string]Measurement
	runMetrics   []reports.Metric
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{steps: map[string]StepKind{}, measurements: map[string]Measurement{}}
}

// AddStep registers a step kind; a name registered twice is a programming error.
func (r *Registry) AddStep(k StepKind) *Registry {
	if _, dup := r.steps[k.Name()]; dup {
		panic(fmt.Sprintf("scenarios: step kind %q registered twice", k.Name()))
	}
	r.steps[k.Name()] = k
	return r
}

// AddMeasurement registers a measurement; a name registered twice is a programming error.
func (r *Registry) AddMeasurement(m Measurement) *Registry {
	if _, dup := r.measurements[m.Name()]; dup {
		panic(fmt.Sprintf("scenarios: measurement %q registered twice", m.Name()))
	}
	r.measurements[m.Name()] = m
	return r
}

// AddRunMetrics declares metrics the runner records by itself (not through a measure
// step), e.g. the control plane's start-up.
func (r *Registry) AddRunMetrics(ms ...reports.Metric) *Registry {
	r.runMetrics = append(r.runMetrics, ms...)
	return r
}

// Step returns the step kind of that name.
func (r *Registry) Step(name string) (StepKind, bool) {
	k, ok := r.steps[name]
	return k, ok
}

// Measurement returns the measurement of that name.
func (r *Registry) Measurement(name string) (Measurement, bool) {
	m, ok := r.measurements[name]
	return m, ok
}

// StepNames returns the registered step kinds' names, sorted.
func (r *Registry) StepNames() []string { return slices.Sorted(maps.Keys(r.steps)) }

// MeasurementNames returns the registered measurements' names, sorted.
func (r *Registry) MeasurementNames() []string {
	return slices.Sorted(maps.Keys(r.measurements))
}

// Metrics returns the declarations of everything a run may record: every measurement's
// metrics and the runner's own. compare reads it for results files that carry none.
func (r *Registry) Metrics() []reports.Metric {
	var out []reports.Metric
	for _, name := range r.MeasurementNames() {
		out = append(out, r.measurements[name].Metrics()...)
	}
	return append(out, r.runMetrics...)
}

// unknown returns the message for an unregistered name: the allowed names and, when one
// is close, the likely one.
func unknown(what, name string, allowed []string) string {
	msg := fmt.Sprintf("unknown %s %q: registered are %s", what, name, strings.Join(allowed, ", "))
	if c := yamlpos.Closest(name, allowed); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	return msg
}

// DefaultRegistry returns the registry of every step kind and measurement kpbench ships.
func DefaultRegistry() *Registry {
	r := NewRegistry()
	for _, k := range shippedSteps() {
		r.AddStep(k)
	}
	for _, m := range shippedMeasurements() {
		r.AddMeasurement(m)
	}
	return r.AddRunMetrics(controlPlaneMetrics()...)
}

// stepKind is a StepKind whose action is *T, decoded strictly from the step's value.
type stepKind[T any, PT interface {
	*T
	Action
}] struct {
	name, doc string
	role      Role
}

func (k stepKind[T, PT]) Name() string { return k.name }
func (k stepKind[T, PT]) Doc() string  { return k.doc }
func (k stepKind[T, PT]) Role() Role   { return k.role }

// Decode decodes the value into a new *T.
func (k stepKind[T, PT]) Decode(in Input) (Action, error) {
	a := PT(new(T))
	return a, in.Decode(a)
}

// measurementKind is a Measurement whose parameters are *T, decoded strictly from the
// step's params; shipped.go declares kpbench's own.
type measurementKind[T any, PT interface {
	*T
	Measuring
}] struct {
	name, doc string
	// metrics names the reports measurements it records (reports.MetricsOf).
	metrics []string
}

func (k measurementKind[T, PT]) Name() string { return k.name }
func (k measurementKind[T, PT]) Doc() string  { return k.doc }

// Metrics declares the named measurements.
func (k measurementKind[T, PT]) Metrics() []reports.Metric { return reports.MetricsOf(k.metrics...) }

// Decode decodes the params into a new *T.
func (k measurementKind[T, PT]) Decode(in Input) (Measuring, error) {
	p := PT(new(T))
	return p, in.Decode(p)
}
