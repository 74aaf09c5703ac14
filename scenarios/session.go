//go:build linux

package scenarios

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/reports"
)

// Progress follows a run step by step: a progress bar, or LineProgress's one line per
// step. The runner calls it from one goroutine at a time.
type Progress interface {
	// StepStarted: a step begins.
	StepStarted(ev StepEvent)
	// StepAdvanced: the running step has done done units of total (0: not known).
	StepAdvanced(ev StepEvent, done, total int)
	// StepFinished: the step ended after d; err is its failure (nil: it passed).
	StepFinished(ev StepEvent, d time.Duration, err error)
	// Note: a remark of the run on a backend (lab built, figures of a measurement).
	Note(backend, msg string)
}

// StepEvent names the step a Progress call is about.
type StepEvent struct {
	// Backend the scenario runs on.
	Backend string
	// Index of the step (1-based) and Total steps of the scenario.
	Index, Total int
	// Label is the step's name, or "step N (kind)".
	Label string
}

// LineProgress writes one line per finished step and per note to W, with the time and
// the backend: `[15:04:05 iptables] 3/9 full-sync-1k: 2.31s`.
type LineProgress struct{ W io.Writer }

// StepStarted writes nothing.
func (LineProgress) StepStarted(StepEvent) {}

// StepAdvanced writes nothing.
func (LineProgress) StepAdvanced(StepEvent, int, int) {}

// StepFinished writes the step's line.
func (p LineProgress) StepFinished(ev StepEvent, d time.Duration, err error) {
	suffix := ""
	if err != nil {
		suffix = " FAILED: " + err.Error()
	}
	p.Note(ev.Backend, fmt.Sprintf("%d/%d %s: %.2fs%s", ev.Index, ev.Total, ev.Label, d.Seconds(), suffix))
}

// Note writes the note's line.
func (p LineProgress) Note(backend, msg string) {
	if p.W != nil {
		fmt.Fprintf(p.W, "[%s %s] %s\n", time.Now().Format("15:04:05"), backend, msg)
	}
}

// Session is one scenario on one backend: what its steps run against, and where they
// record what they found. The runner makes one per backend; steps and measurements use
// it.
type Session struct {
	// Scenario being run.
	Scenario *Scenario
	// Backend the scenario runs on.
	Backend string
	// Cluster is the cluster under test the steps act on.
	Cluster cluster.Cluster

	opts     RunOptions
	registry *Registry
	results  *reports.Results
	step     *stepState // the running step
	synth    synthetic  // the generated Services (synthetic.go)
	churn    *churnRun  // the last mixed churn (churn_mixed.go)
	memBase  int64      // kernel memory before the first step (rules measurement)
}

// stepState is what the session knows of the running step.
type stepState struct {
	ev      StepEvent
	step    *Step
	started time.Time
	cases   int // cases the step recorded
	failed  int // failed cases among them
}

// Logf notes a remark of the run (progress output).
func (s *Session) Logf(format string, args ...any) {
	s.opts.Progress.Note(s.Backend, fmt.Sprintf(format, args...))
}

// Advance reports that the running step has done done units of total (0: not known).
func (s *Session) Advance(done, total int) {
	if s.step != nil {
		s.opts.Progress.StepAdvanced(s.step.ev, done, total)
	}
}

// StepName is the name of the running step: its name, or "step N (kind)".
func (s *Session) StepName() string {
	if s.step == nil {
		return ""
	}
	return s.step.ev.Label
}

// Labels are the labels of a measurement taken now: "services" (the generated Services
// when there are any, else every Service) and the run's labels.
func (s *Session) Labels() map[string]string {
	size := s.synth.count
	if size == 0 {
		size = len(s.Cluster.Services())
	}
	labels := map[string]string{"services": strconv.Itoa(size)}
	maps.Copy(labels, s.opts.Labels)
	return labels
}

// Record adds measurements to the results, with the declarations of their metrics. A
// measurement without samples is not recorded: it is an error naming it, as is one that
// no registered metric declares.
func (s *Session) Record(ms ...reports.Measurement) error {
	var errs []error
	metrics := s.registry.Metrics()
	for _, m := range ms {
		if len(m.Samples) == 0 {
			errs = append(errs, fmt.Errorf("%s%s recorded no sample", m.Name, paramString(m.Params)))
			continue
		}
		decl, ok := reports.MetricOf(metrics, &m)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no registered measurement declares this metric", m.Name))
			continue
		}
		s.results.Declare(decl)
		s.results.Add(s.Backend, m)
	}
	return errors.Join(errs...)
}

// paramString prints the params that tell measurements of one name apart.
func paramString(p map[string]string) string {
	var parts []string
	for _, k := range []string{"kind", "position", "half"} {
		if v, ok := p[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// RecordCase adds a case (an expectation's or a limit's outcome) for the running step:
// Backend is set, and Name defaults to the step's name.
func (s *Session) RecordCase(c reports.Case) {
	c.Backend = s.Backend
	setDefault(&c.Name, s.StepName())
	if s.step != nil {
		s.step.cases++
		if c.Result == reports.CaseFail {
			s.step.failed++
		}
	}
	s.results.Cases = append(s.results.Cases, c)
}

// stepFailureRecorded reports whether the running step recorded a failed case of its own
// (then the runner records none for the step's error).
func (s *Session) stepFailureRecorded() bool { return s.step != nil && s.step.failed > 0 }
