//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/lab/cluster"
	"kpbench.dev/kpbench/lab/manifest"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
	"kpbench.dev/kpbench/testbed"
)

// RunOptions say how to run a scenario.
type RunOptions struct {
	// Backends to run the scenario on, one after the other, each on a fresh lab. Empty:
	// the backend of the scenario's proxy mode.
	Backends []string
	// Progress receives one line per step (nil: discarded).
	Progress io.Writer
	// Labels are added to every run (e.g. kernel=6.1.0-57, accel=tcg from the VM runner).
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
}

// ModeBackend maps a KubeProxyConfiguration mode to the backend that implements it.
func ModeBackend(mode string) string {
	switch mode {
	case "", ModeIPTables:
		return "iptables"
	default:
		return mode
	}
}

// Run executes the scenario on every backend and returns the results: raw measurements per
// backend, and one case per expectation (and per failed step). The returned error is for
// the bench failing (a lab that cannot be built, a backend that cannot sync); a failed
// expectation is a failed case, not an error.
func Run(ctx context.Context, sc *Scenario, o RunOptions) (*reports.Results, error) {
	if len(o.Backends) == 0 {
		o.Backends = []string{ModeBackend(sc.ProxyConfig.Mode)}
	}
	for _, b := range o.Backends {
		if !all.Valid(b) {
			return nil, fmt.Errorf("backend %q: allowed values are %s", b, strings.Join(all.Names(), ", "))
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	res := &reports.Results{
		SchemaVersion: reports.SchemaVersion, Environment: reports.CollectEnvironment(ctx),
		Scenario: sc.Name, Started: time.Now(),
	}
	var errs []error
	for _, b := range o.Backends {
		r := &backendRun{sc: sc, backend: b, opts: o, res: res}
		if err := r.run(ctx); err != nil {
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

// Failed reports whether any case failed.
func Failed(res *reports.Results) bool {
	for _, c := range res.Cases {
		if c.Result == reports.CaseFail {
			return true
		}
	}
	return false
}

// backendRun is one scenario on one backend.
type backendRun struct {
	sc      *Scenario
	backend string
	opts    RunOptions
	res     *reports.Results
	tb      *testbed.Testbed

	synthPods  []synth.Backend // shared endpoints of synthetic services
	synthCount int             // synthetic services [0, synthCount) exist
	synthGen   map[int]int     // generation of each synthetic service's slice
	template   synth.Template
	churnNext  int       // next service to update in an update churn
	lastChurn  *churnRun // the last mixed churn step (runner_churn.go)
	mem0       int64     // kernel memory before the first step (measure.SettledKernelMemory)
}

func (r *backendRun) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Progress, "[%s %s] %s\n", time.Now().Format("15:04:05"), r.backend, fmt.Sprintf(format, args...))
}

func (r *backendRun) run(ctx context.Context) (err error) {
	opts, err := r.sc.TestbedOptions(r.backend, "run"+randomHex(5))
	if err != nil {
		return err
	}
	if opts.Settings.IPTablesWholeTableCache && r.backend == "iptables" {
		r.res.Label(r.backend, LabelIPTablesCache, "whole-table")
	}
	start := time.Now()
	r.logf("building lab: %d nodes, %d clients", opts.Lab.Nodes, opts.Lab.Clients)
	r.tb, err = testbed.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		r.recordControlPlaneEnd()
		err = errors.Join(err, r.writeMetrics(), r.tb.Stop(context.WithoutCancel(ctx)))
	}()
	if r.sc.measures(reports.MeasureRules) {
		r.mem0, _ = measure.SettledKernelMemory(ctx)
	}
	r.recordControlPlane()
	var objs []runtime.Object
	for _, m := range r.sc.Manifests {
		objs = append(objs, manifest.RuntimeObjects(m.Objects)...)
	}
	if len(objs) > 0 {
		if err := r.tb.Apply(ctx, objs...); err != nil {
			return fmt.Errorf("apply manifests: %w", err)
		}
	}
	if err := r.tb.WaitSynced(ctx); err != nil {
		return err
	}
	r.logf("lab up and synced in %.1fs", time.Since(start).Seconds())
	for i := range r.sc.Steps {
		st := &r.sc.Steps[i]
		name := st.Name
		if name == "" {
			name = fmt.Sprintf("step %d (%s)", i+1, st.Action())
		}
		t0 := time.Now()
		mark := r.res.Mark()
		serr := r.step(ctx, st, name)
		r.res.StampStep(mark, name, t0, time.Now())
		r.logf("%d/%d %s: %.2fs%s", i+1, len(r.sc.Steps), name, time.Since(t0).Seconds(), errSuffix(serr))
		if serr != nil {
			if st.Expect == nil { // expectations recorded their own case
				r.res.Cases = append(r.res.Cases, reports.Case{Name: name, Backend: r.backend, Result: reports.CaseFail, Reason: serr.Error(), Duration: time.Since(t0)})
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.saveState(ctx, i+1, name)
			if !st.ContinueOnFailure {
				return fmt.Errorf("%s: %w", name, serr)
			}
		}
	}
	return nil
}

// saveState writes the nodes' state after failed step n (called name) to the state
// directory (if any) and names the file in the step's failed case. A failure to write is
// logged, not returned: the step's own failure is what the run reports.
func (r *backendRun) saveState(ctx context.Context, n int, name string) {
	if r.opts.StateDir == "" {
		return
	}
	path := filepath.Join(r.opts.StateDir, fmt.Sprintf("%s-%s-step%d.txt", r.sc.Name, r.backend, n))
	err := os.MkdirAll(r.opts.StateDir, 0o755)
	if err == nil {
		var buf bytes.Buffer
		err = measure.WriteNodeState(ctx, r.tb, &buf)
		err = errors.Join(err, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	if err != nil {
		r.logf("node state after step %d: %v", n, err)
		return
	}
	r.logf("node state after step %d: %s", n, path)
	if k := len(r.res.Cases) - 1; k >= 0 && r.res.Cases[k].Name == name && r.res.Cases[k].Result == reports.CaseFail {
		c := &r.res.Cases[k]
		c.Evidence = strings.TrimLeft(c.Evidence+"\nnode state at the failure: "+path, "\n")
	}
}

// Measurements of the lab's real control plane (lab/controlplane), when the testbed
// started one: the time until etcd and then kube-apiserver answered ready (Params
// "component"), and their resident memory once ready.
const (
	MeasureControlPlaneStartup = "control-plane-startup"
	MeasureControlPlaneMemory  = "control-plane-memory"
)

// recordControlPlane adds the control plane's start-up time and memory to the results.
func (r *backendRun) recordControlPlane() {
	cp := r.tb.ControlPlane
	if cp == nil {
		return
	}
	add := func(name, component, unit string, v float64) {
		r.res.Add(r.backend, reports.Measurement{Name: name, Params: map[string]string{"component": component, "when": "ready"}, Unit: unit, Samples: []float64{v}})
	}
	add(MeasureControlPlaneStartup, "etcd", reports.UnitSeconds, cp.EtcdStartup.Seconds())
	add(MeasureControlPlaneStartup, "kube-apiserver", reports.UnitSeconds, cp.Startup.Seconds())
	add(MeasureControlPlaneMemory, "etcd", reports.UnitBytes, float64(cp.StartRSS.Etcd))
	add(MeasureControlPlaneMemory, "kube-apiserver", reports.UnitBytes, float64(cp.StartRSS.APIServer))
	r.logf("control plane %s: etcd ready in %.1fs, API server in %.1fs; RSS %d MiB + %d MiB",
		cp.Version, cp.EtcdStartup.Seconds(), cp.Startup.Seconds(), cp.StartRSS.Etcd>>20, cp.StartRSS.APIServer>>20)
}

// recordControlPlaneEnd adds the control plane's resident memory at the end of the run
// (Params "when": "end"), with the store's objects in it.
func (r *backendRun) recordControlPlaneEnd() {
	cp := r.tb.ControlPlane
	if cp == nil {
		return
	}
	u, err := cp.RSS()
	if err != nil {
		return
	}
	services := strconv.Itoa(r.tb.Cluster.Len(cluster.KindService))
	for component, v := range map[string]uint64{"etcd": u.Etcd, "kube-apiserver": u.APIServer} {
		r.res.Add(r.backend, reports.Measurement{Name: MeasureControlPlaneMemory, Unit: reports.UnitBytes, Samples: []float64{float64(v)},
			Params: map[string]string{"component": component, "when": "end", "services": services}})
	}
}

// writeMetrics writes every agent's metrics to the metrics directory (if any).
func (r *backendRun) writeMetrics() error {
	if r.opts.MetricsDir == "" {
		return nil
	}
	var errs []error
	for _, ag := range r.tb.Agents {
		var b bytes.Buffer
		if err := ag.Metrics().WriteProm(&b, ag.Node()); err != nil {
			errs = append(errs, err)
			continue
		}
		name := filepath.Join(r.opts.MetricsDir, fmt.Sprintf("metrics-%s-%s.prom", r.backend, ag.Node()))
		errs = append(errs, os.WriteFile(name, b.Bytes(), 0o644))
	}
	return errors.Join(errs...)
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " FAILED: " + err.Error()
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// step runs one step.
func (r *backendRun) step(ctx context.Context, st *Step, name string) error {
	switch {
	case st.Apply != nil:
		var objs []runtime.Object
		for _, m := range st.Apply.Manifests {
			objs = append(objs, manifest.RuntimeObjects(m.Objects)...)
		}
		return r.tb.Apply(ctx, objs...)
	case st.Delete != nil:
		return r.delete(ctx, st.Delete)
	case st.Scale != nil:
		ns, n := splitName(st.Scale.Deployment)
		return r.tb.Cluster.ScaleDeployment(ns, n, *st.Scale.Replicas)
	case st.SetPods != nil:
		return r.setPods(st.SetPods)
	case st.Churn != nil:
		return r.churn(ctx, st.Churn)
	case st.Wait != nil:
		if st.Wait.Duration != nil {
			return pause(ctx, st.Wait.Duration.Duration)
		}
		timeout := r.opts.WaitTimeout
		if timeout <= 0 {
			timeout = DefaultWaitTimeout
		}
		if st.Wait.Timeout != nil {
			timeout = st.Wait.Timeout.Duration
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return r.tb.WaitSynced(wctx)
	case st.Expect != nil:
		return r.expect(ctx, st.Expect, name)
	case st.Measure != nil:
		return r.measure(ctx, st.Measure)
	}
	return fmt.Errorf("step has no action")
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

func (r *backendRun) delete(ctx context.Context, d *DeleteStep) error {
	if d.Kind != "" {
		ns := d.Namespace
		if ns == "" {
			ns = "default"
		}
		return r.tb.Cluster.Delete(ctx, cluster.Kind(d.Kind), ns, d.Name)
	}
	for _, m := range d.Manifests {
		for _, o := range m.Objects {
			k := o.Key()
			if err := r.tb.Cluster.Delete(ctx, cluster.Kind(k.Kind), k.Namespace, k.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *backendRun) setPods(s *SetPodsStep) error {
	ns := s.Namespace
	if ns == "" {
		ns = "default"
	}
	names := map[string]bool{}
	for _, n := range s.Names {
		pod, err := r.resolvePod(ns, n)
		if err != nil {
			return err
		}
		names[pod] = true
	}
	matched := 0
	for _, p := range r.tb.Cluster.Pods() {
		if p.Namespace != ns {
			continue
		}
		if len(s.Selector) > 0 && !labelsMatch(p.Labels, s.Selector) {
			continue
		}
		if len(s.Names) > 0 && !names[p.Name] {
			continue
		}
		h, _ := r.tb.Lab.Host(testbed.HostName(p.Namespace, p.Name))
		ready, terminating := h.Ready, h.Terminating
		if s.Ready != nil {
			ready = *s.Ready
		}
		if s.Terminating != nil {
			terminating = *s.Terminating
		}
		if err := r.tb.SetPodReady(p.Namespace, p.Name, ready, terminating); err != nil {
			return err
		}
		matched++
	}
	if matched == 0 {
		return fmt.Errorf("setPods: no pod in namespace %s matches", ns)
	}
	return nil
}

func labelsMatch(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// resolvePod finds a pod by its name, or by "<deployment>-<ordinal>": the ordinal-th pod
// of a Deployment in creation order (Deployment pods have generated names).
func (r *backendRun) resolvePod(ns, name string) (string, error) {
	pods := r.tb.Cluster.Pods()
	for _, p := range pods {
		if p.Namespace == ns && p.Name == name {
			return p.Name, nil
		}
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if ord, err := strconv.Atoi(name[i+1:]); err == nil {
			deploy := name[:i]
			var owned []string
			for _, p := range pods {
				if p.Namespace == ns && strings.HasPrefix(p.Name, deploy+"-") && p.Labels["pod-template-hash"] != "" &&
					strings.Count(p.Name[len(deploy)+1:], "-") == 1 {
					owned = append(owned, p.Name)
				}
			}
			sortByCreation(pods, owned)
			if ord < len(owned) {
				return owned[ord], nil
			}
		}
	}
	return "", fmt.Errorf("no pod %s/%s (Deployment pods are addressed as <deployment>-<ordinal>)", ns, name)
}

// sortByCreation orders pod names by their pods' creation time (then name).
func sortByCreation(pods []*corev1.Pod, names []string) {
	created := map[string]time.Time{}
	for _, p := range pods {
		created[p.Name] = p.CreationTimestamp.Time
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := created[a].Compare(created[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// measures reports whether a step of the scenario takes the named measurement.
func (sc *Scenario) measures(name string) bool {
	for _, st := range sc.Steps {
		if st.Measure != nil && st.Measure.Name == name {
			return true
		}
	}
	return false
}
