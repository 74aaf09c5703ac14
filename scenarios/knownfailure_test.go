package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
)

// scriptedStep is a step whose run fails (or not) as the test says, and counts its runs.
type scriptedStep struct {
	err    error
	cancel bool // cancel the run's context before failing (the run's timeout expired)
	record bool // record a case of its own, as an expectation does
	runs   *int
	stop   context.CancelFunc
}

func (a *scriptedStep) Default()                                          {}
func (a *scriptedStep) Validate(*Validation, *field.Path) field.ErrorList { return nil }
func (a *scriptedStep) Run(_ context.Context, s *Session) error {
	*a.runs++
	if a.cancel {
		a.stop()
	}
	if a.record {
		c := reports.Case{Result: reports.CasePass}
		if a.err != nil {
			c.Result, c.Reason = reports.CaseFail, a.err.Error()
		}
		s.RecordCase(c)
	}
	return a.err
}

// TestKnownFailureHidesNoRunError runs steps that fail in scripted ways through the
// runner and judges the run as conform does: a declared step's verdict is an xfail, any
// other failure of it fails the case, and the steps after it still run.
func TestKnownFailureHidesNoRunError(t *testing.T) {
	verdict := unmet(errors.New("expected every probe dropped, got refused 5"))
	timeout := errors.New("only 2 of 5 probes sent before the step's timeout")
	known := &KnownFailure{Reason: "refuses instead of dropping", Backends: []string{"userspace"}}
	tests := []struct {
		name       string
		step       scriptedStep
		declared   bool
		wantLater  int // runs of the step after the failing one
		want       Outcome
		wantReason string
	}{
		{"declared verdict", scriptedStep{err: verdict, record: true}, true, 1, XFail, "refuses instead of dropping"},
		{"declared step times out", scriptedStep{err: timeout, record: true}, true, 1, Fail, "failed for another reason than its declared known failure"},
		{"declared step without case of its own times out", scriptedStep{err: timeout}, true, 1, Fail, "only 2 of 5 probes"},
		{"run's timeout inside a declared step", scriptedStep{err: timeout, record: true, cancel: true}, true, 0, Fail, "context canceled"},
		{"undeclared verdict ends the run", scriptedStep{err: verdict, record: true}, false, 0, Fail, "expected every probe dropped"},
		{"declared step passes", scriptedStep{record: true}, true, 1, XPass, "did not happen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var runs, later int
			step := tt.step
			step.runs, step.stop = &runs, cancel
			first := Step{Name: "first", Kind: "scripted", Action: &step}
			if tt.declared {
				first.KnownFailure = known
			}
			sc := &Scenario{Name: "case", Steps: []Step{first, {Name: "later", Kind: "scripted", Action: &scriptedStep{runs: &later, record: true}}}}
			res := &reports.Results{}
			s := &Session{Scenario: sc, Backend: "userspace", opts: RunOptions{Progress: LineProgress{W: io.Discard}}, results: res}
			err := s.runSteps(ctx)
			if err != nil {
				err = fmt.Errorf("userspace: %w", err) // as Run wraps it
			}
			require.Equal(t, 1, runs)
			assert.Equal(t, tt.wantLater, later, "runs of the later step")
			got, reason := sc.Judge("userspace", res.Cases, err)
			assert.Equal(t, tt.want, got, reason)
			assert.Contains(t, reason, tt.wantReason)
		})
	}
}

// TestJudgeRunErrorAfterExpectedFailure: a run error that no step's case explains (the
// cleanup failed after the declared step failed as declared) fails the case.
func TestJudgeRunErrorAfterExpectedFailure(t *testing.T) {
	known := &KnownFailure{Reason: "source IP is lost", Backends: []string{"userspace"}}
	sc := &Scenario{Name: "case", Steps: []Step{{Name: "a", KnownFailure: known}}}
	cases := []reports.Case{{Name: "a", Backend: "userspace", Result: reports.CaseFail, Reason: "expected x"}}
	got, reason := sc.Judge("userspace", cases, nil)
	assert.Equal(t, XFail, got, reason)
	got, reason = sc.Judge("userspace", cases, errors.New("userspace: cleanup: device busy"))
	assert.Equal(t, Fail, got)
	assert.Contains(t, reason, "cleanup: device busy")
}
