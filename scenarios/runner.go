//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/cluster/testbed"
	"kpbench.dev/kpbench/internal/toolroot"
	"kpbench.dev/kpbench/kubestack/controlplane"
	"kpbench.dev/kpbench/manifest"
	"kpbench.dev/kpbench/reports"
)

// RunOptions say how to run a scenario.
type RunOptions struct {
	// Backends to run the scenario on, one after the other, each on a fresh lab. Empty:
	// the backend of the scenario's proxy mode.
	Backends []string
	// Facts answers what the backends can do, for the checks made before any lab
	// (ValidateFor; nil: those checks happen when the step runs).
	Facts BackendFacts
	// Progress follows the run step by step (nil: nothing is reported; LineProgress
	// writes one line per step).
	Progress Progress
	// Labels are added to every measurement (e.g. kernel=6.1.0-57, accel=tcg from the
	// VM runner).
	Labels map[string]string
	// MetricsDir, when set, receives each node agent's metrics under kube-proxy's names in
	// the Prometheus text format: metrics-<backend>-<node>.prom, written at the end of the
	// backend's run.
	MetricsDir string
	// StateDir, when set, receives the nodes' state at every failed step (rule dumps, IPVS's
	// connection table, conntrack's flows; measure.WriteNodeState), taken right after the
	// failure, before the lab goes: StateDir/<scenario>-<backend>-step<N>.txt, named in the
	// failed case's evidence.
	StateDir string
	// WaitTimeout bounds a wait {synced} step that sets no timeout of its own (0:
	// DefaultWaitTimeout).
	WaitTimeout time.Duration
	// Tools are the userspace tools every backend runs (all.Settings.ToolRoot): the
	// host's (the zero value) or a prepared root (`kpbench tools prepare`). The results'
	// environment records them and the versions of the tools they hold.
	Tools toolroot.Root
	// Rounds runs the backends this many times, interleaved (A B, B A, A B, ...), each
	// pass on a fresh lab, its measurements labelled with their round
	// (reports.RoundParam), for the A/B gate (0 or 1: once, no label; see DefaultRounds).
	Rounds int
	// Opener opens the cluster under test of each pass. Nil: the lab, a fresh testbed
	// per pass built here for the pass's backend. A cluster that kpbench did not build (a
	// kubeconfig's) is run once under its Opener's name in place of a backend: Backends,
	// Facts, Tools and Rounds are not used then.
	Opener Opener
	// Environment, when set, is the results' environment, collected by the caller:
	// conform runs a scenario per case on the same machine and tools, and collects it
	// (and reads the tools' versions, which chroots into a tool root) once. Unset: Run
	// collects it and, in the lab, records Tools.
	Environment *reports.Environment
}

// Opener opens the cluster under test of each pass of a run: the lab's (the default)
// builds a testbed per pass; a kubeconfig's opens a namespace of the scenario's own in a
// cluster that kpbench did not build (cmd/kpbench). The opener belongs to the engine (its
// Open takes the scenario); the clusters it opens know nothing of the engine.
type Opener interface {
	// Name names the cluster in the results in place of a backend, for a cluster that
	// kpbench did not build: the run makes one pass under that name. "" for the lab,
	// whose passes are its backends, round after round.
	Name() string
	// Open opens the cluster for one pass of sc on backend (the pass's name); close
	// removes whatever the pass made there, and is called also after a failure.
	Open(ctx context.Context, sc *Scenario, backend string) (c cluster.Cluster, close func(context.Context) error, err error)
}

// labOpener builds the lab: a fresh testbed per pass with the scenario's topology and
// proxy configuration (TestbedOptions), the pass's backend and the run's tools.
type labOpener struct {
	tools    toolroot.Root
	progress Progress
}

// Name is "": the lab's passes are named by their backends.
func (labOpener) Name() string { return "" }

// Open builds the testbed and waits for every node's first sync; closing it removes the
// lab and every rule.
func (l labOpener) Open(ctx context.Context, sc *Scenario, backend string) (cluster.Cluster, func(context.Context) error, error) {
	opts, err := sc.TestbedOptions(backend, "run"+randomHex(5))
	if err != nil {
		return nil, nil, err
	}
	opts.Settings.ToolRoot = l.tools.ChrootDir()
	l.progress.Note(backend, fmt.Sprintf("building lab: %d nodes, %d clients", opts.Lab.Nodes, opts.Lab.Clients))
	tb, err := testbed.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	return tb, tb.Stop, nil
}

// ModeBackend maps a KubeProxyConfiguration mode to the backend that implements it
// (backends/all.ForMode); a mode no backend implements is returned as it is, for the
// backend validation's error.
func ModeBackend(mode string) string {
	b, _ := all.ForMode(mode)
	return b
}

// Run executes the scenario on every backend and returns the results: raw measurements per
// backend with the declarations of their metrics, and one case per expectation, limit
// and failed step. The scenario is validated again for the backends first (ValidateFor),
// before any lab exists. The returned error is for the bench failing (a lab that cannot
// be built, a backend that cannot sync); a failed expectation is a failed case, not an
// error.
func Run(ctx context.Context, sc *Scenario, o RunOptions) (*reports.Results, error) {
	if o.Progress == nil {
		o.Progress = LineProgress{}
	}
	op := o.Opener
	if op == nil {
		op = labOpener{tools: o.Tools, progress: o.Progress}
	}
	var ps []pass
	if name := op.Name(); name != "" {
		ps = []pass{{backend: name, round: -1}}
	} else {
		var err error
		if ps, err = labPasses(sc, &o); err != nil {
			return nil, err
		}
	}
	reg := sc.registry
	if reg == nil {
		reg = DefaultRegistry()
	}
	res := &reports.Results{SchemaVersion: reports.SchemaVersion, Scenario: sc.Name, Started: time.Now()}
	if o.Environment != nil {
		res.Environment = *o.Environment
	} else {
		res.Environment = reports.CollectEnvironment(ctx)
		if op.Name() == "" {
			if err := RecordTools(ctx, &res.Environment, o.Tools); err != nil {
				o.Progress.Note("", err.Error())
			}
		}
	}
	var errs []error
	for _, p := range ps {
		b := p.backend
		s := &Session{Scenario: sc, Backend: b, opts: p.options(o), registry: reg, results: res}
		if err := s.run(ctx, op); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
			res.Cases = append(res.Cases, reports.Case{Name: sc.Name, Backend: b, Result: reports.CaseFail, Reason: err.Error()})
			if ctx.Err() != nil {
				break
			}
		}
	}
	res.Finished = time.Now()
	return res, errors.Join(errs...)
}

// labPasses checks the lab's backends (default: the scenario's proxy mode's) and the
// scenario against them (ValidateFor), before any lab exists, and orders their passes.
func labPasses(sc *Scenario, o *RunOptions) ([]pass, error) {
	if len(o.Backends) == 0 {
		o.Backends = []string{ModeBackend(sc.ProxyConfig.Mode)}
	}
	for _, b := range o.Backends {
		if err := all.Validate(b); err != nil {
			return nil, err
		}
	}
	if o.Facts == nil {
		o.Facts = RegistryFacts{}
	}
	if err := sc.ValidateFor(ValidationOptions{Backends: o.Backends, Facts: o.Facts}); err != nil {
		return nil, err
	}
	return passes(o.Backends, o.Rounds), nil
}

// Failed reports whether any case failed.
func Failed(res *reports.Results) bool {
	for _, c := range res.Cases {
		if c.Result == reports.CaseFail {
			return true
		}
	}
	return false
}

// StepLabel names step i (0-based) of a scenario in reports: its name, or
// "step N (kind)".
func (sc *Scenario) StepLabel(i int) string {
	st := &sc.Steps[i]
	if st.Name != "" {
		return st.Name
	}
	return fmt.Sprintf("step %d (%s)", i+1, st.Kind)
}

// run opens the pass's cluster, applies the manifests, waits until the proxies
// programmed them and runs every step; the cluster is closed at the end, whatever
// happened.
func (s *Session) run(ctx context.Context, op Opener) (err error) {
	sc := s.Scenario
	if f, _ := all.Lookup(s.Backend); sc.BackendOptions != nil && sc.BackendOptions.IPTables.WholeTableCache && f.Caps.WholeTableCache {
		s.results.Label(s.Backend, LabelIPTablesCache, "whole-table")
	}
	for _, st := range sc.Steps {
		if p, ok := st.Action.(labPreparer); ok {
			p.prepare(ctx, s)
		}
	}
	start := time.Now()
	c, closeCluster, err := op.Open(ctx, sc, s.Backend)
	if err != nil {
		return err
	}
	s.Cluster = c
	defer func() {
		err = errors.Join(err, s.recordControlPlaneEnd(), s.writeMetrics(), closeCluster(context.WithoutCancel(ctx)))
	}()
	if err := s.recordControlPlane(); err != nil {
		return err
	}
	var objs []manifest.Object
	for _, m := range sc.Manifests {
		objs = append(objs, m.Objects...)
	}
	if len(objs) > 0 {
		if err := c.Apply(ctx, manifest.RuntimeObjects(objs)...); err != nil {
			return fmt.Errorf("apply manifests: %w", err)
		}
	}
	if err := c.WaitSynced(ctx); err != nil {
		return err
	}
	if info := c.Info(ctx); info != nil {
		s.results.Environment.Cluster = &reports.ClusterEnvironment{
			ServerVersion: info.ServerVersion, Nodes: info.Nodes, ProxyMode: info.ProxyMode, ProxyModeNote: info.ProxyModeNote,
		}
	}
	s.Logf("cluster up and synced in %.1fs", time.Since(start).Seconds())
	return s.runSteps(ctx)
}

// runSteps runs every step. A failed step ends the run, unless it may fail
// (continueOnFailure, or the verdict its known failure declares), or it declares a known
// failure and failed for another reason: then the later steps still run, and its error
// is returned at the end (the run failed; a known failure hides no run error).
func (s *Session) runSteps(ctx context.Context) error {
	var errs []error
	for i := range s.Scenario.Steps {
		err := s.runStep(ctx, i)
		if err == nil {
			continue
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !s.Scenario.Steps[i].KnownFailure.Declares(s.Backend) {
			break
		}
	}
	return errors.Join(errs...)
}

// runStep runs step i and records its failure: a case (unless the step recorded its own)
// and the nodes' state. It returns the failure as a *StepError unless the step may fail:
// continueOnFailure, or the verdict (ErrUnmet) of a known failure on this backend.
func (s *Session) runStep(ctx context.Context, i int) error {
	st := &s.Scenario.Steps[i]
	s.step = &stepState{ev: StepEvent{Backend: s.Backend, Index: i + 1, Total: len(s.Scenario.Steps), Label: s.Scenario.StepLabel(i)}, step: st, started: time.Now()}
	defer func() { s.step = nil }()
	s.opts.Progress.StepStarted(s.step.ev)
	mark := s.results.Mark()
	serr := st.Action.Run(ctx, s)
	// Every measurement the step added carries its name and window, so that a tail can
	// be traced to the step and time that took it.
	s.results.StampStep(mark, s.step.ev.Label, s.step.started, time.Now())
	s.opts.Progress.StepFinished(s.step.ev, time.Since(s.step.started), serr)
	if serr == nil {
		if st.KnownFailure.Declares(s.Backend) && s.step.cases == 0 {
			// A step declared to fail here that passed: a case, so that it shows (xpass).
			s.RecordCase(reports.Case{Result: reports.CasePass, Duration: time.Since(s.step.started)})
		}
		return nil
	}
	name := s.step.ev.Label
	if !s.stepFailureRecorded() {
		s.RecordCase(reports.Case{Name: name, Result: reports.CaseFail, Reason: serr.Error(), Duration: time.Since(s.step.started)})
	}
	if ctx.Err() != nil {
		return &StepError{Step: name, Err: ctx.Err()}
	}
	s.saveState(ctx, i+1, name)
	declared := st.KnownFailure.Declares(s.Backend)
	if declared && !errors.Is(serr, ErrUnmet) {
		// Not the failure declared (a timeout, an unreachable cluster): it fails the run.
		return &StepError{Step: name, Err: serr}
	}
	if st.ContinueOnFailure || declared {
		return nil
	}
	return &StepError{Step: name, Err: serr}
}

// saveState writes the nodes' state after failed step n (called name) to the state
// directory (if any) and names the file in the step's failed case. A failure to write is
// logged, not returned: the step's own failure is what the run reports.
func (s *Session) saveState(ctx context.Context, n int, name string) {
	if s.opts.StateDir == "" {
		return
	}
	path := filepath.Join(s.opts.StateDir, fmt.Sprintf("%s-%s-step%d.txt", s.Scenario.Name, all.FileName(s.Backend), n))
	err := os.MkdirAll(s.opts.StateDir, 0o755)
	if err == nil {
		var buf bytes.Buffer
		err = s.Cluster.WriteNodeState(ctx, &buf)
		err = errors.Join(err, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	if err != nil {
		s.Logf("node state after step %d: %v", n, err)
		return
	}
	s.Logf("node state after step %d: %s", n, path)
	cases := s.results.Cases
	for k := len(cases) - 1; k >= 0 && cases[k].Backend == s.Backend; k-- {
		if c := &cases[k]; c.Name == name && c.Result == reports.CaseFail {
			c.Evidence = strings.TrimLeft(c.Evidence+"\nnode state at the failure: "+path, "\n")
			return
		}
	}
}

// controlPlaneMetrics declares what recordControlPlane records.
func controlPlaneMetrics() []reports.Metric {
	return reports.MetricsOf(reports.MeasureControlPlaneStartup, reports.MeasureControlPlaneMemory)
}

// controlPlaned is a cluster with the lab's real control plane.
type controlPlaned interface {
	ControlPlane() *controlplane.ControlPlane
}

// controlPlane returns the lab's control plane, or nil.
func (s *Session) controlPlane() *controlplane.ControlPlane {
	if c, ok := s.Cluster.(controlPlaned); ok {
		return c.ControlPlane()
	}
	return nil
}

// recordControlPlane adds the control plane's start-up time and memory to the results.
func (s *Session) recordControlPlane() error {
	cp := s.controlPlane()
	if cp == nil {
		return nil
	}
	m := func(name, component, unit string, v float64) reports.Measurement {
		return reports.Measurement{Name: name, Params: map[string]string{"component": component, "when": "ready"}, Unit: unit, Samples: []float64{v}}
	}
	s.Logf("control plane %s: etcd ready in %.1fs, API server in %.1fs; RSS %d MiB + %d MiB",
		cp.Version, cp.EtcdStartup.Seconds(), cp.Startup.Seconds(), cp.StartRSS.Etcd>>20, cp.StartRSS.APIServer>>20)
	return s.Record(
		m(reports.MeasureControlPlaneStartup, "etcd", reports.UnitSeconds, cp.EtcdStartup.Seconds()),
		m(reports.MeasureControlPlaneStartup, "kube-apiserver", reports.UnitSeconds, cp.Startup.Seconds()),
		m(reports.MeasureControlPlaneMemory, "etcd", reports.UnitBytes, float64(cp.StartRSS.Etcd)),
		m(reports.MeasureControlPlaneMemory, "kube-apiserver", reports.UnitBytes, float64(cp.StartRSS.APIServer)),
	)
}

// recordControlPlaneEnd adds the control plane's resident memory at the end of the run
// (Params "when": "end"), with the store's objects in it.
func (s *Session) recordControlPlaneEnd() error {
	cp := s.controlPlane()
	if cp == nil {
		return nil
	}
	u, err := cp.RSS()
	if err != nil {
		return nil // the figure is absent; the run is not at fault
	}
	services := strconv.Itoa(len(s.Cluster.Services()))
	var ms []reports.Measurement
	for _, c := range []struct {
		component string
		rss       uint64
	}{{"etcd", u.Etcd}, {"kube-apiserver", u.APIServer}} {
		ms = append(ms, reports.Measurement{Name: reports.MeasureControlPlaneMemory, Unit: reports.UnitBytes, Samples: []float64{float64(c.rss)},
			Params: map[string]string{"component": c.component, "when": "end", "services": services}})
	}
	return s.Record(ms...)
}

// writeMetrics writes every proxy's metrics to the metrics directory (if any).
func (s *Session) writeMetrics() error {
	if s.opts.MetricsDir == "" {
		return nil
	}
	var errs []error
	for _, px := range s.Cluster.Proxies() {
		var b bytes.Buffer
		if err := px.Metrics().WriteProm(&b, px.Node()); err != nil {
			errs = append(errs, err)
			continue
		}
		name := filepath.Join(s.opts.MetricsDir, fmt.Sprintf("metrics-%s-%s.prom", all.FileName(s.Backend), px.Node()))
		errs = append(errs, os.WriteFile(name, b.Bytes(), 0o644))
	}
	return errors.Join(errs...)
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
