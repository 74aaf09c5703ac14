//go:build linux

// Package conformance runs kpbench's conformance suite: one scenario file per kube-proxy
// e2e behaviour (the *.yaml files of this directory; manifests they share are in
// manifests/), each a case, on every backend, and judges each case × backend as pass,
// fail, skip, xfail (only steps that declare a knownFailure on that backend failed) or
// xpass (a declared failure that did not happen).
//
// Every other step of a scenario must hold for its case to pass. A backend that cannot
// even run an empty lab on this machine is skipped with the reason, never a crash; a skip
// is not a pass (Report.Unmet), unless the caller allows skips.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/internal/toolroot"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios"
)

// DefaultDir is where the suite lives, relative to the repository root.
const DefaultDir = "scenarios/conformance"

// Outcome is the verdict on one case × backend (scenarios.Judge).
type Outcome = scenarios.Outcome

// Outcomes.
const (
	// Pass: every step and expectation held.
	Pass = scenarios.Pass
	// Fail: a step failed that declares no known failure on the backend.
	Fail = scenarios.Fail
	// Skip: the backend cannot run on this machine (Reason says why).
	Skip = scenarios.Skip
	// XFail: only steps declaring a known failure on the backend failed.
	XFail = scenarios.XFail
	// XPass: a step declaring a known failure on the backend passed (the declaration
	// is stale).
	XPass = scenarios.XPass
)

// Load reads the suite: every *.yaml file of dir (manifests/ holds no scenario), sorted by
// scenario name, keeping those whose name matches one of the comma-separated globs of
// cases ("" or "*": all). Each file is loaded and validated by scenarios.Load; a glob that
// matches no case is an error (a typo in a CI script's case list must not shrink it).
func Load(dir, cases string) ([]*scenarios.Scenario, error) {
	if cases == "" {
		cases = "*"
	}
	globs := strings.Split(cases, ",")
	for i, g := range globs {
		globs[i] = strings.TrimSpace(g)
		if _, err := filepath.Match(globs[i], ""); err != nil || globs[i] == "" {
			if err == nil {
				err = errors.New("empty pattern")
			}
			return nil, fmt.Errorf("cases pattern %q: %w", globs[i], err)
		}
	}
	matched := make([]bool, len(globs))
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no scenario files (*.yaml) in %s", dir)
	}
	var out []*scenarios.Scenario
	var errs []error
	for _, f := range files {
		sc, err := scenarios.Load(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keep := false
		for i, g := range globs {
			if ok, _ := filepath.Match(g, sc.Name); ok {
				matched[i], keep = true, true
			}
		}
		if keep {
			out = append(out, sc)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, g := range globs {
		if !matched[i] {
			return nil, fmt.Errorf("no case of %s matches %q", dir, g)
		}
	}
	slices.SortFunc(out, func(a, b *scenarios.Scenario) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Options say how to run the suite.
type Options struct {
	// Backends to run on (empty: all.Available()).
	Backends []string
	// Progress receives the runner's step lines (nil: discarded).
	Progress io.Writer
	// StateDir, when set, receives the nodes' state at every failed step
	// (scenarios.RunOptions.StateDir).
	StateDir string
	// WaitTimeout bounds the wait steps that set no timeout
	// (scenarios.RunOptions.WaitTimeout).
	WaitTimeout time.Duration
	// Tools are the userspace tools the backends run (scenarios.RunOptions.Tools; the
	// zero value: the host's).
	Tools toolroot.Root
	// Opener, when set, opens a cluster that kpbench did not build for every case
	// instead of a lab per backend (scenarios.RunOptions.Opener); Backends are not used.
	// A case that needs what the cluster cannot do (cluster.ErrNotAvailable) is skipped:
	// not checked.
	Opener scenarios.Opener
}

// Result is one case on one backend.
type Result struct {
	// Case is the scenario's name; Description its e2e test name.
	Case, Description string
	// Backend the case ran on.
	Backend string
	// Outcome is the verdict; Reason says why for anything but a plain pass.
	Outcome Outcome
	Reason  string
	// Duration is the wall time of the case on this backend (lab included).
	Duration time.Duration
	// Steps are the runner's cases: one per expectation and per failed step.
	Steps []reports.Case
	// cluster is the cluster under test as this case's run recorded it (nil in a lab).
	cluster *reports.ClusterEnvironment
}

// Report is the whole suite's outcome.
type Report struct {
	// Backends and Cases are the matrix's columns and rows, in run order.
	Backends, Cases []string
	// Results has one entry per case × backend.
	Results []Result
	// Started and Finished bound the run.
	Started, Finished time.Time
	// Tools are the userspace tools the backends ran (Options.Tools).
	Tools toolroot.Root
	// environment is the machine's, collected once by Run (nil on a cluster that
	// kpbench did not build).
	environment *reports.Environment
	// cluster describes the cluster under test (version, nodes, proxy mode), as the
	// first case that reached it recorded it; nil in a lab.
	cluster *reports.ClusterEnvironment
}

// Get returns the result of a case on a backend.
func (r *Report) Get(name, backend string) (Result, bool) {
	for _, res := range r.Results {
		if res.Case == name && res.Backend == backend {
			return res, true
		}
	}
	return Result{}, false
}

// Unmet returns the results a gate must not accept: every case × backend that did not
// pass, xfail or xpass. A skip (the backend cannot run here) is unmet unless allowSkip:
// a suite that checked nothing has not passed. An xpass is met (the declared failure did
// not happen) but is reported in the matrix and junit.xml, so the stale declaration is seen.
func (r *Report) Unmet(allowSkip bool) []Result {
	var out []Result
	for _, res := range r.Results {
		switch {
		case res.Outcome == Pass, res.Outcome == XFail, res.Outcome == XPass:
		case res.Outcome == Skip && allowSkip:
		default:
			out = append(out, res)
		}
	}
	return out
}

// Failed reports whether any case failed or was skipped (Unmet without skips allowed).
func (r *Report) Failed() bool { return len(r.Unmet(false)) > 0 }

// Verdict says why the report does not pass a gate ("" when it does: every result is
// pass, xfail or xpass, or skip when allowSkip): how many case × backend failed and how
// many were skipped, with each skipped backend's reason once.
func (r *Report) Verdict(allowSkip bool) string {
	unmet := r.Unmet(allowSkip)
	if len(unmet) == 0 {
		return ""
	}
	var failed, skipped int
	var reasons []string
	seen := map[string]bool{}
	for _, res := range unmet {
		if res.Outcome != Skip {
			failed++
			continue
		}
		skipped++
		if key := res.Backend + ": " + res.Reason; !seen[key] {
			seen[key] = true
			reasons = append(reasons, key)
		}
	}
	var parts []string
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d case × backend failed", failed))
	}
	if skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d case × backend not checked (%s; --allow-skip accepts skips)", skipped, strings.Join(reasons, "; ")))
	}
	return strings.Join(parts, ", ")
}

// Run runs every scenario on every backend. Each backend is first checked with an empty
// lab; one that cannot run here has all its cases skipped with the reason. The error is
// for ctx ending; failures are results.
func Run(ctx context.Context, suite []*scenarios.Scenario, o Options) (*Report, error) {
	lab := o.Opener == nil || o.Opener.Name() == ""
	if !lab {
		o.Backends = []string{o.Opener.Name()}
	}
	if len(o.Backends) == 0 {
		o.Backends = all.Available()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rep := &Report{Backends: o.Backends, Started: time.Now(), Tools: o.Tools}
	if lab {
		// One environment for every case: collecting it reads the tools' versions.
		env := reports.CollectEnvironment(ctx)
		_ = scenarios.RecordTools(ctx, &env, o.Tools) // a version not read is left empty
		rep.environment = &env
	}
	for _, sc := range suite {
		rep.Cases = append(rep.Cases, sc.Name)
	}
	for _, b := range o.Backends {
		if lab {
			if err := all.Validate(b); err != nil {
				return nil, err
			}
		}
		if why := preflight(ctx, b, o); why != "" {
			for _, sc := range suite {
				rep.Results = append(rep.Results, Result{Case: sc.Name, Description: sc.Description, Backend: b, Outcome: Skip, Reason: why})
			}
			continue
		}
		for _, sc := range suite {
			if err := ctx.Err(); err != nil {
				rep.Finished = time.Now()
				return rep, err
			}
			r := runCase(ctx, sc, b, o, rep.environment)
			if rep.cluster == nil {
				rep.cluster = r.cluster
			}
			rep.Results = append(rep.Results, r)
		}
	}
	rep.Finished = time.Now()
	return rep, ctx.Err()
}

// preflightScenario is the smallest lab: one node, nothing in the cluster.
const preflightScenario = `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: preflight
topology: {nodes: 1, clients: 0}
steps:
- wait: {synced: true, timeout: 30s}
`

// preflight is Preflight on a lab; a cluster that kpbench did not build is not checked
// beforehand.
func preflight(ctx context.Context, backend string, o Options) string {
	if o.Opener != nil && o.Opener.Name() != "" {
		return ""
	}
	return Preflight(ctx, backend, o.Tools, o.WaitTimeout)
}

// Preflight returns why backend cannot run on this machine with tools ("" when it can): it builds a
// one-node lab with that backend and waits for its first sync, at most timeout (0:
// scenarios.DefaultWaitTimeout), lab included. The bound matters: a backend whose every
// sync fails (its restore binary missing or broken) would otherwise be waited for forever
// while the lab starts; the reason then carries the last sync's error.
func Preflight(ctx context.Context, backend string, tools toolroot.Root, timeout time.Duration) string {
	sc, err := scenarios.ParseScenario("preflight", []byte(preflightScenario), "")
	if err != nil {
		return "preflight scenario: " + err.Error()
	}
	if timeout <= 0 {
		timeout = scenarios.DefaultWaitTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := scenarios.Run(pctx, sc, scenarios.RunOptions{Backends: []string{backend}, Progress: scenarios.LineProgress{}, WaitTimeout: timeout, Tools: tools})
	if err != nil {
		return "cannot run here: " + oneLine(err.Error())
	}
	if scenarios.Failed(res) {
		for _, c := range res.Cases {
			if c.Result == reports.CaseFail && c.Reason != "" {
				return "cannot run here: the first sync failed: " + oneLine(c.Reason)
			}
		}
		return "cannot run here: the first sync failed"
	}
	return ""
}

// RunCase runs one scenario on one backend and judges it, taking knownFailures into
// account; o's Backends are not used.
func RunCase(ctx context.Context, sc *scenarios.Scenario, backend string, o Options) Result {
	return runCase(ctx, sc, backend, o, nil)
}

// runCase is RunCase with the environment collected once by Run (nil: the case's run
// collects its own).
func runCase(ctx context.Context, sc *scenarios.Scenario, backend string, o Options, env *reports.Environment) Result {
	start := time.Now()
	res, err := scenarios.Run(ctx, sc, scenarios.RunOptions{Backends: []string{backend}, Progress: scenarios.LineProgress{W: o.Progress}, StateDir: o.StateDir, WaitTimeout: o.WaitTimeout, Tools: o.Tools, Opener: o.Opener, Environment: env})
	out := Result{Case: sc.Name, Description: sc.Description, Backend: backend, Outcome: Pass, Duration: time.Since(start)}
	if res != nil {
		out.Steps = res.Cases
		out.cluster = res.Environment.Cluster
	}
	if why := notAvailable(err, out.Steps); why != "" {
		out.Outcome, out.Reason = Skip, "not checked: "+why
		return out
	}
	out.Outcome, out.Reason = judge(sc, backend, out.Steps, err)
	return out
}

// notAvailable says why a case could not be checked on its cluster ("" when it could):
// the run ended on cluster.ErrNotAvailable, or a step failed on it.
func notAvailable(err error, steps []reports.Case) string {
	if errors.Is(err, cluster.ErrNotAvailable) {
		return oneLine(err.Error())
	}
	for _, c := range steps {
		if c.Result == reports.CaseFail && strings.Contains(c.Reason+" "+c.Evidence, cluster.ErrNotAvailable.Error()) {
			return c.Name + ": " + oneLine(c.Reason+" "+c.Evidence)
		}
	}
	return ""
}

// judge turns a run's step cases and error into an outcome, taking the steps' known
// failures into account (scenarios.Judge).
func judge(sc *scenarios.Scenario, backend string, steps []reports.Case, runErr error) (Outcome, string) {
	return sc.Judge(backend, steps, runErr)
}

// oneLine joins an error's lines with "; " and bounds it to 400 bytes: a reason for the
// matrix that still names the tool that failed.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ; ")), " ")
	if len(s) > 400 {
		s = s[:400] + " ..."
	}
	return s
}

// WriteMatrix prints the case × backend matrix: one row per case, one column per backend,
// each cell the outcome (with the duration for a run case), then the reasons of every
// cell that is not a plain pass.
func (r *Report) WriteMatrix(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "CASE")
	for _, b := range r.Backends {
		fmt.Fprintf(tw, "\t%s", b)
	}
	fmt.Fprintln(tw)
	counts := map[string]map[Outcome]int{}
	for _, name := range r.Cases {
		fmt.Fprint(tw, name)
		for _, b := range r.Backends {
			res, ok := r.Get(name, b)
			cell := "-"
			if ok {
				cell = string(res.Outcome)
				if res.Outcome != Skip {
					cell += fmt.Sprintf(" (%.1fs)", res.Duration.Seconds())
				}
				if counts[b] == nil {
					counts[b] = map[Outcome]int{}
				}
				counts[b][res.Outcome]++
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "TOTAL")
	for _, b := range r.Backends {
		var parts []string
		for _, o := range []Outcome{Pass, Fail, XFail, XPass, Skip} {
			if n := counts[b][o]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, o))
			}
		}
		fmt.Fprintf(tw, "\t%s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	for _, res := range r.Results {
		if res.Outcome != Pass {
			notes = append(notes, fmt.Sprintf("%s on %s: %s: %s", res.Case, res.Backend, res.Outcome, res.Reason))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	_, err := fmt.Fprintf(w, "%d cases × %d backends in %.1fs\n", len(r.Cases), len(r.Backends), r.Finished.Sub(r.Started).Seconds())
	return err
}

// ReportResults turns the report into reports.Results for reports.WriteAll: one Case
// per case × backend, named "<e2e test name> [<case>]". xfail is written as a skip and
// xpass as a pass, both with the reason prefixed by their outcome; the evidence lists
// every step's outcome.
func (r *Report) ReportResults(ctx context.Context) *reports.Results {
	res := &reports.Results{SchemaVersion: reports.SchemaVersion, Scenario: "conformance", Started: r.Started, Finished: r.Finished}
	if r.environment != nil {
		res.Environment = *r.environment
	} else {
		res.Environment = reports.CollectEnvironment(ctx)
		_ = scenarios.RecordTools(ctx, &res.Environment, r.Tools) // a version not read is left empty
	}
	res.Environment.Cluster = r.cluster
	for _, x := range r.Results {
		c := reports.Case{Name: x.Case, Backend: x.Backend, Reason: x.Reason, Duration: x.Duration}
		if x.Description != "" {
			c.Name = x.Description + " [" + x.Case + "]"
		}
		switch x.Outcome {
		case Pass:
			c.Result = reports.CasePass
		case Fail:
			c.Result = reports.CaseFail
		case Skip:
			c.Result = reports.CaseSkip
		case XFail:
			c.Result, c.Reason = reports.CaseSkip, "xfail: "+x.Reason
		case XPass:
			c.Result, c.Reason = reports.CasePass, "xpass: "+x.Reason
		}
		var ev strings.Builder
		for _, s := range x.Steps {
			fmt.Fprintf(&ev, "%s: %s", s.Name, s.Result)
			if s.Reason != "" {
				fmt.Fprintf(&ev, ": %s", s.Reason)
			}
			if s.Evidence != "" {
				fmt.Fprintf(&ev, " (%s)", s.Evidence)
			}
			ev.WriteByte('\n')
		}
		c.Evidence = ev.String()
		res.Cases = append(res.Cases, c)
	}
	return res
}

// Exists reports whether dir holds a suite (for a clear error before anything runs).
func Exists(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("conformance suite: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("conformance suite: %s is not a directory", dir)
	}
	return nil
}
