package e2e

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// Outcome is what became of one test in one run.
type Outcome string

// The outcomes of a test, from ginkgo's spec states.
const (
	// Passed: the spec ran and passed.
	Passed Outcome = "passed"
	// Failed: the spec failed, timed out, panicked, was aborted or interrupted.
	Failed Outcome = "failed"
	// Skipped: the spec started and skipped itself (e2eskipper), with a reason: the
	// cluster lacks what it needs (nodes, SSH, a provider, ...).
	Skipped Outcome = "skipped"
	// Listed: a dry run selected the spec; it did not run.
	Listed Outcome = "listed"
)

// Test is one spec's result in one run.
type Test struct {
	// Name is the spec's full text, "[sig-network] Services should ...", with the
	// node type prefixed for a suite node ("[SynchronizedBeforeSuite]").
	Name string `json:"name"`
	// Outcome is passed, failed or skipped (listed in a dry run).
	Outcome Outcome `json:"outcome"`
	// Seconds is the spec's run time.
	Seconds float64 `json:"seconds"`
	// Reason says why the spec failed or skipped: the failure's message (its first lines)
	// or the skip's; empty when it passed.
	Reason string `json:"reason,omitempty"`
	// Location is where a failure happened (test/e2e/network/service.go:1234).
	Location string `json:"location,omitempty"`
	// State is ginkgo's state of the spec (failed, timedout, panicked, ...).
	State string `json:"state"`
}

// Suite is the result of one e2e.test run, from its junit_01.xml.
type Suite struct {
	// Tests are the specs that ran (passed, failed or skipped themselves), sorted by name,
	// and any suite node (BeforeSuite, AfterSuite, ...) that failed.
	Tests []Test `json:"tests"`
	// NotSelected counts the specs that --ginkgo.focus and --ginkgo.skip left out.
	NotSelected int `json:"notSelected"`
	// Seconds is the suite's run time.
	Seconds float64 `json:"seconds"`
}

// Counts returns how many tests passed, failed and skipped.
func (s *Suite) Counts() (passed, failed, skipped int) {
	for _, t := range s.Tests {
		switch t.Outcome {
		case Passed:
			passed++
		case Failed:
			failed++
		case Skipped:
			skipped++
		}
	}
	return passed, failed, skipped
}

// The JUnit XML that e2e.test writes into --report-dir (junit_01.xml): ginkgo v2's
// reporters.GenerateJUnitReportWithConfig, as test/e2e/framework/internal/junit calls it
// (failure message attribute omitted, so the message is read from the failure's text).
// Only the fields read here are declared.
type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Time  float64     `xml:"time,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Time    float64       `xml:"time,attr"`
	Skipped *junitMessage `xml:"skipped"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// maxReasonLines bounds the lines of a failure message kept as its Reason (the rest, often a
// dump of objects, is in the JUnit file and the log).
const maxReasonLines = 4

// ParseJUnit reads the junit_01.xml of an e2e.test run.
func ParseJUnit(r io.Reader) (*Suite, error) {
	var doc junitSuites
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse junit: %w", err)
	}
	if len(doc.Suites) == 0 {
		return nil, fmt.Errorf("parse junit: no <testsuite>")
	}
	s := &Suite{Tests: []Test{}}
	for _, ts := range doc.Suites {
		s.Seconds += ts.Time
		for _, c := range ts.Cases {
			t, selected := testOf(c)
			if !selected {
				s.NotSelected++
				continue
			}
			if t.Outcome == Passed && !strings.HasPrefix(c.Name, "[It] ") {
				continue // a suite node that did its job: not a test
			}
			s.Tests = append(s.Tests, t)
		}
	}
	sortTests(s.Tests)
	return s, nil
}

// testOf maps a JUnit test case to a Test; selected is false for a spec the focus and skip
// patterns left out (ginkgo reports it "skipped" with no reason, and pending specs alike).
func testOf(c junitCase) (t Test, selected bool) {
	t = Test{Name: strings.TrimPrefix(c.Name, "[It] "), Seconds: c.Time, State: c.Status}
	switch c.Status {
	case "passed":
		t.Outcome = Passed
	case "skipped":
		msg := ""
		if c.Skipped != nil {
			msg = c.Skipped.Message
		}
		reason, ok := strings.CutPrefix(msg, "skipped - ")
		if !ok {
			return t, false
		}
		t.Outcome, t.Reason = Skipped, strings.TrimSpace(reason)
	case "pending":
		return t, false
	default: // failed, timedout, aborted, panicked, interrupted
		t.Outcome = Failed
		m := c.Failure
		if m == nil {
			m = c.Error
		}
		if m != nil {
			t.Reason, t.Location = failureReason(m)
		}
		if t.Reason == "" {
			t.Reason = c.Status
		}
	}
	return t, true
}

// failureReason extracts the message and location from ginkgo's failure text:
//
//	[FAILED] <message, possibly several lines>
//	In [It] at: <file>:<line> @ <time>
func failureReason(m *junitMessage) (reason, location string) {
	text := strings.TrimSpace(m.Text)
	if text == "" {
		return strings.TrimSpace(m.Message), ""
	}
	if i := strings.Index(text, "] "); strings.HasPrefix(text, "[") && i > 0 {
		text = text[i+2:]
	}
	msg := text
	if i := strings.Index(text, "\nIn ["); i >= 0 {
		msg = text[:i]
		loc := text[i+len("\nIn ["):]
		if j := strings.Index(loc, " at: "); j >= 0 {
			loc = loc[j+len(" at: "):]
			if k := strings.IndexAny(loc, " \n"); k >= 0 {
				loc = loc[:k]
			}
			location = loc
		}
	}
	if m.Message != "" && strings.TrimSpace(msg) == "" {
		msg = m.Message
	}
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	if len(lines) > maxReasonLines {
		lines = append(lines[:maxReasonLines], "...")
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "\n"), location
}
