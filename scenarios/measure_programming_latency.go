//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
)

// ProgrammingLatencyParams are the programming-latency measurement's parameters.
type ProgrammingLatencyParams struct {
	// Mode is "" (the default: read the proxies' sync records and the last probed
	// churn) or "probed": make Samples endpoint changes of a Service of its own through
	// the API and time each, per node, from the API's acknowledgement to the first probe
	// from that node that is answered by the new endpoint (half "api-to-probe"). Probed
	// needs no proxy records, so it is the mode that runs on a real cluster
	// (--kubeconfig), where the proxy is not kpbench's.
	Mode string `json:"mode,omitempty"`
	// Samples is how many changes probed mode makes (default 20, the gate's minimum).
	Samples int `json:"samples,omitempty"`
	// Timeout bounds one change's wait on each node (probed mode; default 30s): a node
	// that does not see it by then fails the step.
	Timeout *Duration `json:"timeout,omitempty"`
}

// ProgrammingModeProbed is ProgrammingLatencyParams.Mode for changes made and probed by
// the measurement itself.
const ProgrammingModeProbed = "probed"

// Default sets probed mode's sample count and timeout.
func (p *ProgrammingLatencyParams) Default() {
	if p.Mode != ProgrammingModeProbed {
		return
	}
	setDefault(&p.Samples, 20)
	if p.Timeout == nil {
		p.Timeout = NewDuration(30 * time.Second)
	}
}

// Validate needs a change with a trigger time before the step, unless the measurement
// makes its own (probed).
func (p *ProgrammingLatencyParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	params := path.Child("params")
	switch p.Mode {
	case "":
	case ProgrammingModeProbed:
		errs := intRange(params.Child("samples"), p.Samples, 1, MaxProbeCount)
		return append(errs, validateDuration(p.Timeout, params.Child("timeout"))...)
	default:
		return field.ErrorList{field.NotSupported(params.Child("mode"), p.Mode, []string{ProgrammingModeProbed})}
	}
	if !v.TriggeredChanges {
		return field.ErrorList{field.Forbidden(path.Child("name"), "programming latency is measured from a change's trigger time, and no step before this one makes such a change: churns with pattern add, update or delete (allAtOnce or at a rate) write none; make one with a mixed churn (with a probe for the data-plane half), or change pods behind a Service with a selector")}
	}
	return nil
}

// Measure returns both halves after a probed churn, else the sync half of every change
// so far.
func (p *ProgrammingLatencyParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	if p.Mode == ProgrammingModeProbed {
		return p.measureProbed(ctx, s) // programming_probed.go
	}
	if s.churn != nil && s.churn.log != nil {
		return s.churn.analyze().LatencyMeasurements(s.Labels()), nil
	}
	m := measure.ProgrammingLatency(s.Cluster.Proxies(), s.Labels())
	if len(m.Samples) == 0 {
		return nil, fmt.Errorf("programming-latency: no change with a trigger time reached a proxy so far")
	}
	return []reports.Measurement{m}, nil
}
