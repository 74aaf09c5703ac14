//go:build linux

package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
)

// Cluster is what a session runs against: a cluster whose objects the steps change, whose
// hosts send probes, and whose proxies program the nodes. The lab's testbed implements it
// (TestbedCluster); a real cluster reached through a kubeconfig can too (objects through
// the API, probes from prober pods, proxies read through their metrics).
type Cluster interface {
	Objects
	Hosts
	Proxies
}

// Objects are the cluster's Kubernetes objects.
type Objects interface {
	// Apply creates or updates objects (all or nothing), as `kubectl apply` would.
	Apply(ctx context.Context, objs ...runtime.Object) error
	// Delete removes one object (kind: Service, EndpointSlice, Pod, Deployment).
	Delete(ctx context.Context, kind, namespace, name string) error
	// Get returns one object.
	Get(kind, namespace, name string) (runtime.Object, error)
	// Services, EndpointSlices and Pods list the objects of those kinds.
	Services() []*corev1.Service
	EndpointSlices() []*discoveryv1.EndpointSlice
	Pods() []*corev1.Pod
	// ScaleDeployment sets a Deployment's replica count.
	ScaleDeployment(ctx context.Context, namespace, name string, replicas int32) error
	// SetPodConditions sets a pod's Ready condition and termination (nil: unchanged), as
	// failing probes or a graceful deletion would.
	SetPodConditions(ctx context.Context, namespace, name string, ready, terminating *bool) error
	// ResourceVersion grows with every change of the objects.
	ResourceVersion() uint64
}

// Hosts are the places probes are sent from: nodes, external clients and pods.
type Hosts interface {
	// Host returns a host by name (node-N, client-N, a probe pod, a pod's host name).
	Host(name string) (lab.Host, bool)
	// Hosts returns the hosts of one kind, in name order.
	Hosts(kind lab.HostKind) []lab.Host
	// PodHost returns the host of a cluster pod.
	PodHost(namespace, name string) (lab.Host, bool)
	// ProbeHost names the probe pod of a node: a pod that belongs to no Service.
	ProbeHost(node string) string
	// AddPod adds an echo server pod on a node that no controller manages (the
	// endpoints of generated Services).
	AddPod(ctx context.Context, name, node string) (lab.Host, error)
	// AddClientRoute makes prefix (a load-balancer or external IP) reachable from the
	// external clients.
	AddClientRoute(ctx context.Context, prefix netip.Prefix) error
	// ClientFor returns the host that sends client's traffic to targetNode (a NodePort or
	// health-check node port there; "" for none): the client itself in a lab. A cluster
	// with no client outside it sends from another node's host network, as an external
	// client would reach the target node, and says so in note ("" when the client sends
	// itself).
	ClientFor(client, targetNode string) (host lab.Host, note string, err error)
	// Prober returns the shared prober of a host.
	Prober(host string) (Prober, error)
	// NewProber returns a prober of its own with that many workers; the caller closes it.
	NewProber(host string, workers int) (ProberCloser, error)
}

// Proxies are the proxies that program the cluster's nodes.
type Proxies interface {
	// WaitSynced waits until every node's proxy has programmed every change made so far.
	WaitSynced(ctx context.Context) error
	// Proxies returns every node's proxy, in node order.
	Proxies() []Proxy
	// WriteNodeState writes every node's rules and connection-tracking state (what a
	// failed step leaves to be read).
	WriteNodeState(ctx context.Context, w io.Writer) error
	// KernelRules counts the rules (or IPVS services and destinations) on the first node.
	KernelRules(ctx context.Context) (int, error)
}

// Prober sends probes from one host.
type Prober interface {
	measure.Prober
	// DialContext opens a connection from the host (an HTTP transport's dialer).
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// ProberCloser is a prober of one's own.
type ProberCloser interface {
	Prober
	Close() error
}

// Proxy is one node's proxy.
type Proxy interface {
	measure.Proxy
	// Backend is the backend the proxy drives (for measurements that need one of its
	// capabilities).
	Backend() backends.Backend
}

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
	// Cluster the steps act on.
	Cluster Cluster

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
	if c.Name == "" {
		c.Name = s.StepName()
	}
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
