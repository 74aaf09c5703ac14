//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WaitStep waits until a condition holds, or for a fixed time. Exactly one of Synced and
// Duration is set.
type WaitStep struct {
	// Synced waits until every node's proxy has programmed the current state.
	Synced bool `json:"synced,omitempty"`
	// Duration waits this long, doing nothing (e.g. to let a session affinity entry
	// expire), at most MaxWaitDuration.
	Duration *Duration `json:"duration,omitempty"`
	// Timeout fails the step when the condition does not hold in time (default 60s, or
	// what `--wait-timeout` says).
	Timeout *Duration `json:"timeout,omitempty"`
}

// Default leaves the timeout unset: the runner applies RunOptions.WaitTimeout, else
// DefaultWaitTimeout, so that a slow machine can lengthen the default alone.
func (w *WaitStep) Default() {}

// Validate requires exactly one of synced and duration, with sane durations.
func (w *WaitStep) Validate(_ *Validation, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case w.Synced && w.Duration != nil:
		errs = append(errs, field.Forbidden(p, "set either synced or duration, not both"))
	case !w.Synced && w.Duration == nil:
		errs = append(errs, field.Required(p.Child("synced"), "must be true (wait until synced), or set a duration to wait"))
	case w.Duration != nil && w.Timeout != nil:
		errs = append(errs, field.Forbidden(p.Child("timeout"), "a fixed duration has no timeout"))
	case w.Duration != nil && w.Duration.Duration > MaxWaitDuration:
		errs = append(errs, field.Invalid(p.Child("duration"), w.Duration.String(), fmt.Sprintf("must be at most %s", MaxWaitDuration)))
	}
	if w.Duration != nil {
		errs = append(errs, validateDuration(w.Duration, p.Child("duration"))...)
	}
	if w.Timeout != nil {
		errs = append(errs, validateDuration(w.Timeout, p.Child("timeout"))...)
	}
	return errs
}

// Run waits.
func (w *WaitStep) Run(ctx context.Context, s *Session) error {
	if w.Duration != nil {
		return pause(ctx, w.Duration.Duration)
	}
	timeout := s.opts.WaitTimeout
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	if w.Timeout != nil {
		timeout = w.Timeout.Duration
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.Cluster.WaitSynced(wctx)
}

// pause waits for d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
