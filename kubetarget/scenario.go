//go:build linux

package kubetarget

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios"
	"kpbench.dev/kpbench/scenarios/measure"
)

// scenarioNamespace is the namespace a scenario's objects are shown in: the run's
// namespace is the cluster's business, the scenario names its objects as it wrote them.
const scenarioNamespace = "default"

// idlePort is where netexec listens in a scenario's pod that declares no port (its
// client pods), so that it can send probes.
const idlePort = 8080

// ScenarioTarget runs scenarios against a cluster reached through a kubeconfig
// (scenarios.RunOptions.Target): each scenario gets a namespace of its own, deleted at
// its end.
type ScenarioTarget struct {
	// Client talks to the cluster.
	Client kubernetes.Interface
	// Options are each run's options (RunID is made per scenario).
	Options Options
	// DeleteTimeout bounds the wait for a scenario's namespace to be gone (default 2 min).
	DeleteTimeout time.Duration
	// NewRunID returns a fresh run id (the namespace's suffix).
	NewRunID func() string

	mu   sync.Mutex
	last *Scene
}

// Name is "cluster".
func (st *ScenarioTarget) Name() string { return "cluster" }

// Open creates the scenario's namespace and probers.
func (st *ScenarioTarget) Open(ctx context.Context, sc *scenarios.Scenario) (scenarios.Cluster, func(context.Context) error, error) {
	o := st.Options
	o.RunID = st.NewRunID()
	t, err := New(ctx, st.Client, nil, o)
	if err != nil {
		return nil, nil, err
	}
	if want := sc.Topology.Nodes; want > len(t.nodes) {
		return nil, nil, fmt.Errorf("%w: scenario %s wants %d nodes, the cluster has %d Ready ones", ErrBadConfig, sc.Name, want, len(t.nodes))
	}
	timeout := st.DeleteTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	closer := func(ctx context.Context) error { return t.Close(ctx, timeout) }
	if err := t.Start(ctx); err != nil {
		return nil, nil, errors.Join(err, closer(context.WithoutCancel(ctx)))
	}
	s := &Scene{t: t}
	st.mu.Lock()
	st.last = s
	st.mu.Unlock()
	return s, closer, nil
}

// Environment records the cluster's version, node count and kube-proxy's mode (asked
// of the last opened scenario's node prober).
func (st *ScenarioTarget) Environment(ctx context.Context, env *reports.Environment) {
	st.mu.Lock()
	s := st.last
	st.mu.Unlock()
	if s == nil {
		return
	}
	ce := &reports.ClusterEnvironment{ServerVersion: s.t.version, Nodes: len(s.t.nodes)}
	ce.ProxyMode, ce.ProxyModeNote = s.t.ProxyMode(ctx)
	env.Cluster = ce
}

// Scene is one scenario's view of the cluster (scenarios.Cluster): its objects live in
// the run's namespace and are shown in "default"; its nodes are called node-0, node-1,
// ... in name order; probes go from prober pods through the API server (/dial).
type Scene struct {
	t  *Target
	rv atomic.Uint64

	nsMu sync.Mutex
	ns   map[string]string // kind/name → the namespace the scenario gave the object
}

// scenarioNS is the namespace the scenario gave an object (default "default").
func (s *Scene) scenarioNS(kind, name string) string {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if ns, ok := s.ns[kind+"/"+name]; ok {
		return ns
	}
	return scenarioNamespace
}

var _ scenarios.Cluster = (*Scene)(nil)

// realNode maps a scenario's node name (node-N) to the cluster's.
func (s *Scene) realNode(name string) string {
	if rest, ok := strings.CutPrefix(name, "node-"); ok {
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i < len(s.t.nodes) {
			return s.t.nodes[i].Name
		}
	}
	return name
}

// labNode maps a cluster node name to the scenario's (node-N).
func (s *Scene) labNode(name string) string {
	for i, n := range s.t.nodes {
		if n.Name == name {
			return "node-" + strconv.Itoa(i)
		}
	}
	return name
}

func (s *Scene) changed(ctx context.Context) error {
	s.rv.Add(1)
	return s.t.refresh(ctx)
}

// Apply creates the objects in the run's namespace (the manifests changed as for check:
// agnhost netexec in every container), or updates the ones that exist.
func (s *Scene) Apply(ctx context.Context, objs ...runtime.Object) error {
	s.nsMu.Lock()
	if s.ns == nil {
		s.ns = map[string]string{}
	}
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && m.GetNamespace() != "" {
			s.ns[kindOf(o)+"/"+m.GetName()] = m.GetNamespace()
		}
	}
	s.nsMu.Unlock()
	out, _, err := Workload(objs, WorkloadOptions{Namespace: s.t.namespace, RunID: s.t.opts.RunID, Image: s.t.opts.Image, KeepImages: s.t.opts.KeepImages, IdlePort: idlePort})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	var errs []error
	for _, o := range out {
		switch v := o.(type) {
		case *corev1.Pod:
			v.Spec.NodeName = s.realNode(v.Spec.NodeName)
		case *appsv1.Deployment:
			v.Spec.Template.Spec.NodeName = s.realNode(v.Spec.Template.Spec.NodeName)
		case *discoveryv1.EndpointSlice:
			for i := range v.Endpoints {
				if n := v.Endpoints[i].NodeName; n != nil {
					r := s.realNode(*n)
					v.Endpoints[i].NodeName = &r
				}
			}
		}
		if err := s.createOrUpdate(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, s.changed(ctx))...)
}

func (s *Scene) createOrUpdate(ctx context.Context, o runtime.Object) error {
	err := s.t.create(ctx, o)
	if err == nil || !apierrors.IsAlreadyExists(errors.Unwrap(err)) {
		return err
	}
	ns, name := s.t.namespace, o.(metav1.Object).GetName()
	switch v := o.(type) {
	case *corev1.Service:
		cur, gerr := s.t.client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		v.ResourceVersion, v.Spec.ClusterIP, v.Spec.ClusterIPs = cur.ResourceVersion, cur.Spec.ClusterIP, cur.Spec.ClusterIPs
		_, err = s.t.client.CoreV1().Services(ns).Update(ctx, v, metav1.UpdateOptions{})
	case *discoveryv1.EndpointSlice:
		cur, gerr := s.t.client.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		v.ResourceVersion = cur.ResourceVersion
		_, err = s.t.client.DiscoveryV1().EndpointSlices(ns).Update(ctx, v, metav1.UpdateOptions{})
	case *appsv1.Deployment:
		cur, gerr := s.t.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		v.ResourceVersion = cur.ResourceVersion
		_, err = s.t.client.AppsV1().Deployments(ns).Update(ctx, v, metav1.UpdateOptions{})
	default:
		return err // pods are not updated in place
	}
	if err != nil {
		return fmt.Errorf("update %s %s/%s: %w", kindOf(o), ns, name, err)
	}
	return nil
}

// Delete removes one object of the run (pods without grace).
func (s *Scene) Delete(ctx context.Context, kind, _, name string) error {
	ns := s.t.namespace
	var err error
	switch kind {
	case "Service":
		err = s.t.client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "EndpointSlice":
		err = s.t.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "Pod":
		zero := int64(0)
		err = s.t.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	case "Deployment":
		err = s.t.client.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
	default:
		return fmt.Errorf("delete %s %s: kind not supported on a cluster", kind, name)
	}
	if err != nil {
		return fmt.Errorf("delete %s %s/%s: %w", kind, ns, name, err)
	}
	return s.changed(ctx)
}

// Get returns one object of the run as last read.
func (s *Scene) Get(kind, _, name string) (runtime.Object, error) {
	var found runtime.Object
	switch kind {
	case "Service":
		for _, v := range s.Services() {
			if v.Name == name {
				found = v
			}
		}
	case "EndpointSlice":
		for _, v := range s.EndpointSlices() {
			if v.Name == name {
				found = v
			}
		}
	case "Pod":
		for _, v := range s.Pods() {
			if v.Name == name {
				found = v
			}
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s %s in the run", kind, name)
	}
	return found, nil
}

// Services are the run's Services, shown in the scenario's namespace.
func (s *Scene) Services() []*corev1.Service {
	var out []*corev1.Service
	for _, v := range s.t.Services() {
		c := v.DeepCopy()
		c.Namespace = s.scenarioNS("Service", c.Name)
		out = append(out, c)
	}
	return out
}

// EndpointSlices are the run's EndpointSlices, shown in the scenario's namespace with
// the scenario's node names.
func (s *Scene) EndpointSlices() []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, v := range s.t.EndpointSlices() {
		c := v.DeepCopy()
		c.Namespace = s.scenarioNS("EndpointSlice", c.Name)
		for i := range c.Endpoints {
			if n := c.Endpoints[i].NodeName; n != nil {
				l := s.labNode(*n)
				c.Endpoints[i].NodeName = &l
			}
		}
		out = append(out, c)
	}
	return out
}

// Pods are the run's pods (probers included), shown in the scenario's namespace with
// the scenario's node names.
func (s *Scene) Pods() []*corev1.Pod {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	var out []*corev1.Pod
	for _, v := range s.t.pods {
		c := v.DeepCopy()
		c.Namespace = s.scenarioNS("Pod", c.Name)
		c.Spec.NodeName = s.labNode(c.Spec.NodeName)
		out = append(out, c)
	}
	return out
}

// ScaleDeployment sets a Deployment's replicas through its scale subresource.
func (s *Scene) ScaleDeployment(ctx context.Context, _, name string, replicas int32) error {
	sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.t.namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	if _, err := s.t.client.AppsV1().Deployments(s.t.namespace).UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale Deployment %s: %w", name, err)
	}
	return s.changed(ctx)
}

// SetPodConditions is not available: on a cluster only the kubelet sets them.
func (s *Scene) SetPodConditions(context.Context, string, string, *bool, *bool) error {
	return fmt.Errorf("set pod conditions: %w (only the kubelet sets them on a real cluster)", scenarios.ErrNotAvailable)
}

// ResourceVersion grows with every change the scenario made.
func (s *Scene) ResourceVersion() uint64 { return s.rv.Load() }

// Host returns node-N (the N-th node), client-N (a client kpbench does not have on a
// cluster: its prober is not available) or a pod of the run.
func (s *Scene) Host(name string) (lab.Host, bool) {
	for i, n := range s.t.nodes {
		if name == "node-"+strconv.Itoa(i) {
			return lab.Host{Name: name, Kind: lab.KindNode, IP: n.IP}, true
		}
	}
	if strings.HasPrefix(name, "client-") {
		return lab.Host{Name: name, Kind: lab.KindClient}, true
	}
	return s.PodHost(scenarioNamespace, name)
}

// Hosts returns the nodes (as node-N) or the run's pod-network pods.
func (s *Scene) Hosts(kind lab.HostKind) []lab.Host {
	switch kind {
	case lab.KindNode:
		var out []lab.Host
		for i, n := range s.t.nodes {
			out = append(out, lab.Host{Name: "node-" + strconv.Itoa(i), Kind: lab.KindNode, IP: n.IP})
		}
		return out
	case lab.KindPod:
		out := s.t.Hosts(lab.KindPod)
		for i := range out {
			out[i].Node = s.labNode(out[i].Node)
		}
		return out
	}
	return nil
}

// PodHost returns a pod of the run with a pod-network address.
func (s *Scene) PodHost(_, name string) (lab.Host, bool) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for _, p := range s.t.pods {
		if p.Name != name || p.Spec.HostNetwork {
			continue
		}
		ip, _ := netip.ParseAddr(p.Status.PodIP)
		return lab.Host{Name: p.Name, Kind: lab.KindPod, IP: ip, Node: s.labNode(p.Spec.NodeName), Labels: p.Labels,
			Ready: podReady(p), Terminating: p.DeletionTimestamp != nil}, true
	}
	return lab.Host{}, false
}

// ProbeHost names the node's prober pod.
func (s *Scene) ProbeHost(node string) string { return proberName(s.realNode(node)) }

// synthPort is the port AddPod's pods serve, TCP and UDP: the lab pods' default port.
const synthPort = 8080

// AddPod creates an agnhost netexec pod (HTTP and UDP on synthPort, as the lab's pods) on
// node and waits until it has an address.
func (s *Scene) AddPod(ctx context.Context, name, node string) (lab.Host, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: s.realNode(node), Containers: []corev1.Container{{Name: "echo", Image: "agnhost",
			Ports: []corev1.ContainerPort{{ContainerPort: synthPort}, {ContainerPort: synthPort, Protocol: corev1.ProtocolUDP}}}}},
	}
	if err := s.Apply(ctx, pod); err != nil {
		return lab.Host{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.t.opts.ReadyTimeout)
	defer cancel()
	var h lab.Host
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		p, err := s.t.client.CoreV1().Pods(s.t.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			return false, nil
		}
		h = lab.Host{Name: name, Kind: lab.KindPod, IP: ip, Node: node, Ports: []lab.Port{{Protocol: echo.TCP, Number: synthPort}, {Protocol: echo.UDP, Number: synthPort}}}
		return true, nil
	}, "pod "+name+" to get an address")
	return h, err
}

// ClientFor sends a client's traffic from the host network of a node other than
// targetNode (the first in order): kpbench has no client outside the cluster, and another
// node's host network is where traffic that reaches targetNode from outside it comes from
// as the proxy sees it (its source is that node's address, not a pod's). Traffic from
// targetNode's own host network would be the node's local traffic, which proxies treat
// differently (externalTrafficPolicy: Local does not drop it). A one-node cluster has no
// other node: not available.
func (s *Scene) ClientFor(client, targetNode string) (lab.Host, string, error) {
	for _, n := range s.Hosts(lab.KindNode) {
		if n.Name != targetNode {
			return n, fmt.Sprintf(" (%s sent from %s's host network: kpbench has no client outside the cluster)", client, n.Name), nil
		}
	}
	return lab.Host{}, "", fmt.Errorf("probes from %s: %w (kpbench has no client outside the cluster, and no node other than %s to send from)", client, scenarios.ErrNotAvailable, targetNode)
}

// AddClientRoute is not available: kpbench has no client outside the cluster.
func (s *Scene) AddClientRoute(context.Context, netip.Prefix) error {
	return fmt.Errorf("route to a load-balancer or external IP: %w (needs a client outside the cluster routed to the IP)", scenarios.ErrNotAvailable)
}

// Prober returns the prober of a host: node-N's hostNetwork prober, a prober pod, or a
// pod of the run (its netexec).
func (s *Scene) Prober(host string) (scenarios.Prober, error) {
	r, err := s.requester(host)
	if err != nil {
		return nil, err
	}
	return sceneProber{r}, nil
}

// NewProber returns a prober of the caller's own (the same: probes hold no state).
func (s *Scene) NewProber(host string, _ int) (scenarios.ProberCloser, error) {
	r, err := s.requester(host)
	if err != nil {
		return nil, err
	}
	return sceneProber{r}, nil
}

func (s *Scene) requester(host string) (*dialRequester, error) {
	for i, n := range s.t.nodes {
		if host == "node-"+strconv.Itoa(i) {
			return &dialRequester{t: s.t, pod: hostProberName(n.Name), port: hostProberPort(s.t.opts.RunID)}, nil
		}
	}
	if strings.HasPrefix(host, "client-") {
		return nil, fmt.Errorf("probes from %s: %w (kpbench has no client outside the cluster)", host, scenarios.ErrNotAvailable)
	}
	if r, err := s.t.Requester(host); err == nil {
		return r.(*dialRequester), nil
	}
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for _, p := range s.t.pods {
		if p.Name == host && len(p.Spec.Containers) > 0 {
			for _, a := range p.Spec.Containers[0].Args {
				if v, ok := strings.CutPrefix(a, "--http-port="); ok {
					if port, err := strconv.Atoi(v); err == nil && port > 0 {
						return &dialRequester{t: s.t, pod: host, port: int32(port)}, nil
					}
				}
			}
			return nil, fmt.Errorf("pod %s runs no netexec to send probes from", host)
		}
	}
	return nil, fmt.Errorf("no host %q in the run", host)
}

// sceneProber sends a scenario's probes through /dial. A probe's latency is the whole
// round trip: API server, kubelet's proxy, netexec, the Service, and back.
type sceneProber struct{ r *dialRequester }

// Request sends one probe; a fixed source port is not available (netexec picks its own).
func (p sceneProber) Request(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result {
	if opts.SourcePort != 0 {
		err := fmt.Errorf("probe from source port %d: %w (netexec's /dial picks its own port)", opts.SourcePort, scenarios.ErrNotAvailable)
		return probe.Result{Err: err, Class: probe.Other}
	}
	res := p.r.Request(ctx, target, opts)
	if res.Err != nil {
		return res
	}
	// The client address the endpoint saw: a second /dial asking netexec's /clientip
	// (another connection from the same pod; the proxy's rewriting does not depend on
	// the source port).
	a, err := p.r.dialUnchecked(ctx, target, opts, 1, "clientip")
	if err == nil && len(a.Responses) > 0 {
		if ap, perr := netip.ParseAddrPort(strings.TrimSpace(a.Responses[0])); perr == nil {
			res.Answer.Client = ap
		}
	}
	return res
}

// Connect times one /dial probe (API server round trip included): Connect and Total are
// the same.
func (p sceneProber) Connect(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result {
	if opts.SourcePort != 0 {
		return p.Request(ctx, target, opts)
	}
	res := p.r.Request(ctx, target, opts)
	res.Connect = res.Total
	return res
}

// Dial is not available: a kept connection would live in the prober pod.
func (p sceneProber) Dial(context.Context, probe.Destination, probe.Options) (measure.Conn, error) {
	return nil, fmt.Errorf("kept connection: %w", scenarios.ErrNotAvailable)
}

// DialContext is not available: connections start in the prober pod.
func (p sceneProber) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, fmt.Errorf("connection from a prober pod: %w", scenarios.ErrNotAvailable)
}

// Close does nothing.
func (p sceneProber) Close() error { return nil }

// Proxies returns none: a real cluster's proxies are not kpbench's.
func (s *Scene) Proxies() []scenarios.Proxy { return nil }

// WriteNodeState is not available on a real cluster.
func (s *Scene) WriteNodeState(_ context.Context, w io.Writer) error {
	_, _ = io.WriteString(w, "node state: not available on a real cluster (kpbench does not read its nodes' rules)\n")
	return fmt.Errorf("node state: %w", scenarios.ErrNotAvailable)
}

// KernelRules is not available on a real cluster.
func (s *Scene) KernelRules(context.Context) (int, error) {
	return 0, fmt.Errorf("kernel rules: %w (kpbench does not read a real cluster's nodes)", scenarios.ErrNotAvailable)
}

// maxWaitServices bounds the Services WaitSynced probes: beyond it, the first, middle and
// last Services stand for the others.
const maxWaitServices = 20

// WaitSynced waits until the run's pods are Ready (deleted ones gone), every selector
// Service's EndpointSlices list exactly its ready pods, and then until each Service's
// ClusterIP, from every node's prober, answers from exactly the endpoints that node may
// reach (refuses when there are none): the proxies programmed the change. Each
// Service × node waits settleTimeout at most, then the run goes on (the steps judge).
func (s *Scene) WaitSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.t.opts.ReadyTimeout)
	defer cancel()
	if err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		if err := s.t.refresh(ctx); err != nil {
			return false, err
		}
		if p := s.notReady(); p != "" {
			return false, errors.New(p)
		}
		return true, nil
	}, "the run's pods to be Ready and their endpoints published"); err != nil {
		return err
	}
	svcs := s.t.Services()
	if len(svcs) > maxWaitServices {
		svcs = []*corev1.Service{svcs[0], svcs[len(svcs)/2], svcs[len(svcs)-1]}
	}
	for _, svc := range svcs {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
			continue
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		sp := svc.Spec.Ports[0]
		if err != nil || sp.Protocol == corev1.ProtocolSCTP {
			continue
		}
		target := targetOf(netip.AddrPortFrom(ip, uint16(sp.Port)), sp.Protocol)
		if svc.Labels["service.kubernetes.io/service-proxy-name"] != "" {
			// Not the proxy's: wait until node 0's prober is no longer answered.
			r := &dialRequester{t: s.t, pod: proberName(s.t.nodes[0].Name), port: proberPort}
			wctx, wcancel := context.WithTimeout(ctx, settleTimeout)
			_ = poll(wctx, 200*time.Millisecond, func() (bool, error) {
				a, err := r.dial(wctx, target, probeOptions(), 1)
				return err == nil && len(a.Errors) > 0, nil
			}, "")
			wcancel()
			continue
		}
		affinity := svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP
		for _, n := range s.t.nodes {
			r := &dialRequester{t: s.t, pod: proberName(n.Name), port: proberPort}
			s.waitService(ctx, r, target, svc, n.Name, affinity)
		}
	}
	return ctx.Err()
}

// waitService waits until the Service answers from node's prober as its endpoints say.
func (s *Scene) waitService(ctx context.Context, r *dialRequester, target probe.Destination, svc *corev1.Service, node string, affinity bool) {
	want := s.t.endpointPods(svc, node)
	hasEndpoints := s.hasEndpoints(svc)
	if len(want) == 0 && hasEndpoints && svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal {
		return // no endpoint on this node: its traffic is dropped, which a probe cannot tell from not synced yet
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	tries := min(50, max(1, 4*len(want)))
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		a, err := r.dial(ctx, target, probeOptions(), tries)
		if err != nil {
			return false, err
		}
		if len(want) == 0 && hasEndpoints {
			return len(a.Errors) == 0, nil // endpoints that are no pods of the run: answered is all that can be seen
		}
		if len(want) == 0 {
			return len(a.Responses) == 0 && len(a.Errors) > 0 && classify(a.Errors[0]) == probe.Refused, nil
		}
		if len(a.Errors) > 0 {
			return false, nil
		}
		seen := map[string]bool{}
		for _, resp := range a.Responses {
			pod := strings.TrimSpace(resp)
			if !want[pod] {
				return false, nil
			}
			seen[pod] = true
		}
		if affinity {
			// ClientIP affinity in effect: every try from this prober (one client IP)
			// lands on one pod. Without it, tries = 4 per endpoint spread over them (all
			// on one pod by chance: (1/n)^(tries-1), 2e-6 for 3 endpoints). Answers from
			// any endpoint alone would end the wait before a switch to ClientIP is
			// programmed, and the sticky step after it would judge the old rules
			// (session-affinity-switch failed so on the cluster path).
			return len(seen) == 1, nil
		}
		return len(seen) == len(want), nil
	}, "")
	if err != nil && ctx.Err() != nil {
		s.t.logf("Service %s: node %s's proxy did not show its %d endpoints within %s; going on", svc.Name, node, len(want), settleTimeout)
	}
}

// hasEndpoints reports whether the Service's EndpointSlices that a proxy reads (not
// labelled headless) list a ready endpoint (an unset Ready condition counts as ready, as
// for the proxies).
func (s *Scene) hasEndpoints(svc *corev1.Service) bool {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for _, sl := range s.t.slices {
		if _, headless := sl.Labels[corev1.IsHeadlessService]; headless || sl.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

// notReady says what is not ready yet ("" when everything is).
func (s *Scene) notReady() string {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for _, p := range s.t.pods {
		if p.DeletionTimestamp != nil {
			return "pod " + p.Name + " is being deleted"
		}
		if !podReady(p) {
			return "pod " + p.Name + " not ready (" + podWaitReason(p) + ")"
		}
	}
	for _, svc := range s.t.services {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		pods := map[string]bool{}
		for _, p := range s.t.pods {
			if sel.Matches(labels.Set(p.Labels)) && p.Status.PodIP != "" {
				pods[p.Status.PodIP] = true
			}
		}
		eps := map[string]bool{}
		for _, sl := range s.t.slices {
			if sl.Labels[discoveryv1.LabelServiceName] != svc.Name {
				continue
			}
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					for _, a := range ep.Addresses {
						eps[a] = true
					}
				}
			}
		}
		if len(eps) != len(pods) {
			return fmt.Sprintf("Service %s: %d ready endpoints, %d ready pods", svc.Name, len(eps), len(pods))
		}
		for a := range eps {
			if !pods[a] {
				return fmt.Sprintf("Service %s: endpoint %s is no ready pod", svc.Name, a)
			}
		}
	}
	return ""
}
