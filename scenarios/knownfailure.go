package scenarios

import (
	"errors"
	"strings"

	"kpbench.dev/kpbench/reports"
)

// Outcome is the verdict on one scenario on one backend, known failures considered.
type Outcome string

// Outcomes.
const (
	// Pass: every step and expectation held.
	Pass Outcome = "pass"
	// Fail: a step failed that declares no known failure on this backend.
	Fail Outcome = "fail"
	// Skip: the backend cannot run here (conformance's preflight).
	Skip Outcome = "skip"
	// XFail: only steps that declare a known failure on this backend failed.
	XFail Outcome = "xfail"
	// XPass: a step that declares a known failure on this backend passed (the
	// declaration is stale), and nothing else failed.
	XPass Outcome = "xpass"
)

// ErrUnmet marks a step's failure as its verdict: the step ran to its end and what it
// checks did not hold (an expectation's probes were answered otherwise, a figure went
// beyond its limit). Only such a failure is the failure a knownFailure declares; a step
// that fails for another reason (a timeout, a cluster that could not be reached) fails
// the run even where it declares a known failure.
var ErrUnmet = errors.New("not met")

// unmet marks err (when not nil) as a step's verdict (ErrUnmet), its text unchanged.
func unmet(err error) error {
	if err == nil {
		return nil
	}
	return &unmetError{err: err}
}

// unmetError is an error marked as a step's verdict.
type unmetError struct{ err error }

func (e *unmetError) Error() string   { return e.err.Error() }
func (e *unmetError) Unwrap() []error { return []error{e.err, ErrUnmet} }

// StepError is the failure of one step that counts against the run: a step without
// continueOnFailure that failed, or a step that declares a known failure and failed for
// another reason than its verdict (its later steps still run).
type StepError struct {
	// Step is the step's label (Scenario.StepLabel).
	Step string
	// Err is why the step failed.
	Err error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }

// Unwrap returns the step's error.
func (e *StepError) Unwrap() error { return e.Err }

// failedSteps returns the labels of the steps whose StepError err holds, anywhere in
// its tree (Run wraps and joins them per backend).
func failedSteps(err error) map[string]error {
	out := map[string]error{}
	var walk func(error)
	walk = func(err error) {
		if se, ok := err.(*StepError); ok {
			out[se.Step] = se.Err
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// Judge turns a run of the scenario on backend (its cases and error) into an outcome: a
// failed step is an expected failure when it declares one for the backend and failed
// on its verdict (ErrUnmet), and a fail otherwise; a declared step that passed is an
// xpass. A run error that no failed step explains (a timeout after an expected failure,
// a cleanup that failed) is a fail: a known failure never hides one. The reason names
// the steps.
func (sc *Scenario) Judge(backend string, cases []reports.Case, runErr error) (Outcome, string) {
	declared := map[string]*KnownFailure{}
	for i := range sc.Steps {
		if k := sc.Steps[i].KnownFailure; k.Declares(backend) {
			declared[sc.StepLabel(i)] = k
		}
	}
	var failed, xfailed, xpassed []string
	otherwise := failedSteps(runErr)
	seen := map[string]bool{}
	for _, c := range cases {
		if c.Backend != "" && c.Backend != backend || c.Name == sc.Name { // the run-level case repeats a step's error
			continue
		}
		k, isDeclared := declared[c.Name]
		switch {
		case c.Result == reports.CaseFail && isDeclared && otherwise[c.Name] != nil:
			failed = append(failed, c.Name+": failed for another reason than its declared known failure ("+k.String()+"): "+firstLine(otherwise[c.Name].Error()))
		case c.Result == reports.CaseFail && isDeclared:
			xfailed = append(xfailed, c.Name+": "+k.String()+" (failed: "+firstLine(c.Reason)+")")
		case c.Result == reports.CaseFail:
			failed = append(failed, c.Name+": "+firstLine(c.Reason))
		}
		if isDeclared {
			seen[c.Name] = seen[c.Name] || c.Result == reports.CaseFail
		}
	}
	if runErr != nil && len(failed) == 0 {
		failed = append(failed, firstLine(runErr.Error()))
	}
	for i := range sc.Steps {
		name := sc.StepLabel(i)
		if k, ok := declared[name]; ok && !seen[name] && stepRan(cases, name, backend) {
			xpassed = append(xpassed, name+": declared known failure did not happen: "+k.String())
		}
	}
	switch {
	case len(failed) > 0:
		return Fail, strings.Join(append(failed, xfailed...), "; ")
	case len(xpassed) > 0:
		return XPass, strings.Join(xpassed, "; ")
	case len(xfailed) > 0:
		return XFail, strings.Join(xfailed, "; ")
	}
	return Pass, ""
}

// stepRan reports whether a case of the step was recorded (a step that records no case
// when it passes, such as a wait, counts as run when the run got past it: its absence
// among failures is all there is to see).
func stepRan(cases []reports.Case, name, backend string) bool {
	for _, c := range cases {
		if c.Name == name && (c.Backend == "" || c.Backend == backend) {
			return true
		}
	}
	return false
}

// String is the declaration in one line: the reason and the issue.
func (k *KnownFailure) String() string {
	if k.Issue == "" {
		return k.Reason
	}
	return k.Reason + " (" + k.Issue + ")"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
