//go:build linux

package scenarios

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
)

// Sync kinds.
const (
	SyncFull    = "full"
	SyncPartial = "partial"
)

// SyncParams are the sync measurement's parameters.
type SyncParams struct {
	// Kind is full (default) or partial.
	Kind string `json:"kind,omitempty"`
	// Repeats is the number of syncs timed, 1-1000 (default 3).
	Repeats int `json:"repeats,omitempty"`
}

// Default sets kind full and 3 repeats.
func (p *SyncParams) Default() {
	setDefault(&p.Kind, SyncFull)
	setDefault(&p.Repeats, 3)
}

// Validate checks kind and repeats; a partial sync needs generated Services to change.
func (p *SyncParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	path = path.Child("params")
	var errs field.ErrorList
	switch p.Kind {
	case SyncFull:
	case SyncPartial:
		if v.SyntheticServices == 0 {
			errs = append(errs, field.Invalid(path.Child("kind"), p.Kind, "a partial sync changes a generated Service, and none exists at this step: add some first (a churn with pattern add)"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), p.Kind, []string{SyncFull, SyncPartial}))
	}
	errs = append(errs, intRange(path.Child("repeats"), p.Repeats, 1, 1000)...)
	return errs
}

// Measure times the syncs.
func (p *SyncParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	proxies := s.Cluster.Proxies()
	if len(proxies) == 0 {
		return nil, fmt.Errorf("sync: the cluster has no proxy")
	}
	change := func(ctx context.Context, i int) error {
		return s.changeOne(ctx, func() { s.Advance(i+1, p.Repeats) })
	}
	return measure.Sync(ctx, proxies[0], p.Kind == SyncFull, p.Repeats, change, measure.MachineWork, s.Labels())
}

// intRange returns an error when v is outside [lo, hi].
func intRange(p *field.Path, v, lo, hi int) field.ErrorList {
	if v < lo || v > hi {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be in range %d-%d", lo, hi))}
	}
	return nil
}
