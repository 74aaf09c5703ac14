package scenarios

import (
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

// Judge turns a run of the scenario on backend (its cases and error) into an outcome: a
// failed step is an expected failure when it declares one for the backend, and a fail
// otherwise; a declared step that passed is an xpass. The reason names the steps.
func (sc *Scenario) Judge(backend string, cases []reports.Case, runErr error) (Outcome, string) {
	declared := map[string]*KnownFailure{}
	for i := range sc.Steps {
		if k := sc.Steps[i].KnownFailure; k.Declares(backend) {
			declared[sc.StepLabel(i)] = k
		}
	}
	var failed, xfailed, xpassed []string
	seen := map[string]bool{}
	for _, c := range cases {
		if c.Backend != "" && c.Backend != backend || c.Name == sc.Name { // the run-level case repeats a step's error
			continue
		}
		k, isDeclared := declared[c.Name]
		switch {
		case c.Result == reports.CaseFail && isDeclared:
			xfailed = append(xfailed, c.Name+": "+k.String()+" (failed: "+firstLine(c.Reason)+")")
		case c.Result == reports.CaseFail:
			failed = append(failed, c.Name+": "+firstLine(c.Reason))
		}
		if isDeclared {
			seen[c.Name] = seen[c.Name] || c.Result == reports.CaseFail
		}
	}
	if runErr != nil && len(failed) == 0 && len(xfailed) == 0 {
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
