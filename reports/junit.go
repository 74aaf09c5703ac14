package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"time"
)

// JUnit XML, the dialect CI systems (Jenkins, GitLab, GitHub test reporters) read, as
// Kubernetes' e2e and clusterloader2 write it.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr,omitempty"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	// SystemOut carries a passed case's reason (conformance's "xpass: ..."), which
	// would otherwise not show in JUnit.
	SystemOut string `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes r's Cases as JUnit XML: one <testsuite> per backend (named after it),
// one <testcase> per case (classname "kpbench.<backend>"), with a <failure> or <skipped>
// element whose message is the reason and whose text is the evidence. A run without cases
// gives an empty <testsuites>.
func WriteJUnit(w io.Writer, r *Results) error {
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	out := junitSuites{Name: r.Scenario}
	var total time.Duration
	for _, b := range backends(r) {
		s := junitSuite{Name: b}
		if !r.Started.IsZero() {
			s.Timestamp = r.Started.UTC().Format(time.RFC3339)
		}
		var d time.Duration
		for _, c := range r.Cases {
			if c.Backend != b {
				continue
			}
			jc := junitCase{Name: c.Name, Classname: "kpbench." + b, Time: secs(c.Duration)}
			switch c.Result {
			case CaseFail:
				jc.Failure = &junitMessage{Message: c.Reason, Type: "Failure", Body: c.Evidence}
				s.Failures++
			case CaseSkip:
				jc.Skipped = &junitMessage{Message: c.Reason, Body: c.Evidence}
				s.Skipped++
			case CasePass:
				jc.SystemOut = c.Reason
			default:
				return fmt.Errorf("write junit: case %q on %s: unknown result %q", c.Name, b, c.Result)
			}
			s.Cases = append(s.Cases, jc)
			s.Tests++
			d += c.Duration
		}
		if s.Tests == 0 {
			continue
		}
		s.Time = secs(d)
		total += d
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Skipped += s.Skipped
		out.Suites = append(out.Suites, s)
	}
	out.Time = secs(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}
