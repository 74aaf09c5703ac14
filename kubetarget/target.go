package kubetarget

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/scenarios/check"
)

// DefaultMaxObjects bounds the objects (and pods) one run creates.
const DefaultMaxObjects = 25000

// HostProberPorts is the range of ports the hostNetwork probers' netexec listens on, on
// every node: each run takes one from its id, so that runs side by side do not collide.
const (
	HostProberPortMin = 19000
	HostProberPortMax = 19999
)

// hostProberPort is the run's hostNetwork prober port.
func hostProberPort(runID string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(runID))
	return HostProberPortMin + int32(h.Sum32()%(HostProberPortMax-HostProberPortMin+1))
}

// proberPort is the pod-network probers' netexec port.
const proberPort = 8080

// Options configure a Target.
type Options struct {
	// RunID names the run (namespace kpbench-<RunID>).
	RunID string
	// Workload options (the namespace and run id are set by the Target).
	Image      string
	KeepImages bool
	// MaxObjects bounds the objects and pods created (default DefaultMaxObjects).
	MaxObjects int
	// ReadyTimeout bounds the wait for the pods, endpoints and proxies (default 3 min).
	ReadyTimeout time.Duration
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// Target is a cluster reached through a kubeconfig, seen from one run's namespace.
type Target struct {
	client    kubernetes.Interface
	opts      Options
	namespace string
	version   string
	nodes     []lab.Host
	objects   []runtime.Object
	notes     []string

	mu       sync.Mutex
	created  bool
	services []*corev1.Service
	slices   []*discoveryv1.EndpointSlice
	pods     []*corev1.Pod
}

// New reads the cluster's version and nodes and plans the run's objects (nothing is
// created yet). A plan above MaxObjects is refused (ErrBadConfig).
func New(ctx context.Context, client kubernetes.Interface, objs []runtime.Object, o Options) (*Target, error) {
	if o.MaxObjects == 0 {
		o.MaxObjects = DefaultMaxObjects
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 3 * time.Minute
	}
	t := &Target{client: client, opts: o, namespace: "kpbench-" + o.RunID}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("cluster: server version: %w", err)
	}
	t.version = v.GitVersion
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster: list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) || n.Spec.Unschedulable {
			continue
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() {
				t.nodes = append(t.nodes, lab.Host{Name: n.Name, Kind: lab.KindNode, IP: ip})
				break
			}
		}
	}
	sort.Slice(t.nodes, func(i, j int) bool { return t.nodes[i].Name < t.nodes[j].Name })
	if len(t.nodes) == 0 {
		return nil, errors.New("cluster: no Ready, schedulable node with an IPv4 InternalIP")
	}
	t.objects, t.notes, err = Workload(objs, WorkloadOptions{Namespace: t.namespace, RunID: o.RunID, Image: o.Image, KeepImages: o.KeepImages})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if n := t.ObjectCount(); n > o.MaxObjects {
		return nil, fmt.Errorf("%w: the run would create %d objects and pods, more than --max-objects %d", ErrBadConfig, n, o.MaxObjects)
	}
	return t, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Namespace is the run's namespace.
func (t *Target) Namespace() string { return t.namespace }

// ServerVersion is the API server's version.
func (t *Target) ServerVersion() string { return t.version }

// Nodes are the cluster's Ready nodes, in name order.
func (t *Target) Nodes() []lab.Host { return t.nodes }

// Notes say how the manifests were changed (images replaced, volumes dropped).
func (t *Target) Notes() []string { return t.notes }

// ObjectCount is the number of objects the run creates, pods of Deployments included:
// the namespace, two probers per node and the workload.
func (t *Target) ObjectCount() int {
	n := 1 + 2*len(t.nodes)
	for _, o := range t.objects {
		n++
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			n += int(*d.Spec.Replicas)
		}
	}
	return n
}

// Plan lists what Start would create, one line each (the dry run).
func (t *Target) Plan(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s, %d nodes; would create %d objects and pods:\n", t.version, len(t.nodes), t.ObjectCount())
	fmt.Fprintf(&b, "  Namespace %s (label %s=%s)\n", t.namespace, RunLabel, t.opts.RunID)
	for _, n := range t.nodes {
		fmt.Fprintf(&b, "  Pod %s/%s on %s (prober, %s netexec :%d)\n", t.namespace, proberName(n.Name), n.Name, t.image(), proberPort)
		fmt.Fprintf(&b, "  Pod %s/%s on %s (hostNetwork prober, netexec on the node's :%d)\n", t.namespace, hostProberName(n.Name), n.Name, hostProberPort(t.opts.RunID))
	}
	for _, o := range t.objects {
		m := o.(metav1.Object)
		extra := ""
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			extra = fmt.Sprintf(" (%d pods)", *d.Spec.Replicas)
		}
		fmt.Fprintf(&b, "  %s %s/%s%s\n", kindOf(o), m.GetNamespace(), m.GetName(), extra)
	}
	for _, n := range t.notes {
		fmt.Fprintf(&b, "  change: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t *Target) image() string {
	if t.opts.Image != "" {
		return t.opts.Image
	}
	return AgnhostImage
}

func (t *Target) logf(format string, args ...any) {
	if t.opts.Log != nil {
		fmt.Fprintf(t.opts.Log, "[%s cluster] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

func proberName(node string) string     { return "kpb-prober-" + node }
func hostProberName(node string) string { return "kpb-hprober-" + node }

// Start creates the namespace, the probers and the workload. Whatever it created is
// removed by Close, also when Start fails.
func (t *Target) Start(ctx context.Context) error {
	host, _ := os.Hostname()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        t.namespace,
		Labels:      map[string]string{RunLabel: t.opts.RunID},
		Annotations: map[string]string{OwnerAnnotation: host + "/" + strconv.Itoa(os.Getpid())},
	}}
	if _, err := t.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", t.namespace, err)
	}
	t.mu.Lock()
	t.created = true
	t.mu.Unlock()
	t.logf("namespace %s created", t.namespace)
	for _, n := range t.nodes {
		for _, p := range []*corev1.Pod{t.prober(n.Name, false), t.prober(n.Name, true)} {
			if _, err := t.client.CoreV1().Pods(t.namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create prober %s: %w", p.Name, err)
			}
		}
	}
	for _, o := range t.objects {
		if err := t.create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (t *Target) prober(node string, hostNetwork bool) *corev1.Pod {
	name, port := proberName(node), int32(proberPort)
	if hostNetwork {
		name, port = hostProberName(node), hostProberPort(t.opts.RunID)
	}
	no := false
	one := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.namespace, Labels: map[string]string{RunLabel: t.opts.RunID, "kpbench.dev/role": "prober"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			HostNetwork:                   hostNetwork,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &one,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "netexec", Image: t.image(), ImagePullPolicy: corev1.PullIfNotPresent,
				Args:           []string{"netexec", "--http-port=" + strconv.Itoa(int(port)), "--udp-port=-1"},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstrPort(port)}}, PeriodSeconds: 1},
			}},
		},
	}
}

func (t *Target) create(ctx context.Context, o runtime.Object) error {
	var err error
	ns := t.namespace
	switch v := o.(type) {
	case *corev1.Service:
		_, err = t.client.CoreV1().Services(ns).Create(ctx, v, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = t.client.CoreV1().Pods(ns).Create(ctx, v, metav1.CreateOptions{})
	case *appsv1.Deployment:
		_, err = t.client.AppsV1().Deployments(ns).Create(ctx, v, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = t.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, v, metav1.CreateOptions{})
	default:
		err = errors.New("kind not supported")
	}
	if err != nil {
		return fmt.Errorf("create %s %s/%s: %w", kindOf(o), ns, o.(metav1.Object).GetName(), err)
	}
	return nil
}

// Close deletes the run's namespace (its pods first, without grace) and waits until it
// is gone, within timeout.
func (t *Target) Close(ctx context.Context, timeout time.Duration) error {
	t.mu.Lock()
	created := t.created
	t.mu.Unlock()
	if !created {
		return nil
	}
	return DeleteNamespace(ctx, t.client, t.namespace, timeout)
}

// DeleteNamespace deletes a namespace kpbench made (its pods at once, then the
// namespace) and waits until it is gone, within timeout.
func DeleteNamespace(ctx context.Context, client kubernetes.Interface, ns string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	zero := int64(0)
	err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pods of %s: %w", ns, err)
	}
	bg := metav1.DeletePropagationBackground
	err = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return poll(ctx, 500*time.Millisecond, func() (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	}, "namespace "+ns+" gone")
}

// poll calls cond every interval until it is done, fails, or ctx ends (an error naming
// what was awaited).
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error), what string) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		done, err := cond()
		if done {
			return err
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// refresh reads the namespace's Services, EndpointSlices and Pods.
func (t *Target) refresh(ctx context.Context) error {
	svcs, err := t.client.CoreV1().Services(t.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	sls, err := t.client.DiscoveryV1().EndpointSlices(t.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list endpointslices: %w", err)
	}
	pods, err := t.client.CoreV1().Pods(t.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.services, t.slices, t.pods = nil, nil, nil
	for i := range svcs.Items {
		t.services = append(t.services, &svcs.Items[i])
	}
	for i := range sls.Items {
		t.slices = append(t.slices, &sls.Items[i])
	}
	for i := range pods.Items {
		t.pods = append(t.pods, &pods.Items[i])
	}
	return nil
}

// WaitSynced waits until every pod of the run is Ready, every selector Service's
// EndpointSlices list its ready pods, and each such Service's ClusterIP answers from
// every node's prober (the proxies programmed it).
func (t *Target) WaitSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.opts.ReadyTimeout)
	defer cancel()
	if err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		if err := t.refresh(ctx); err != nil {
			return false, err
		}
		if p := t.notReady(); p != "" {
			return false, errors.New(p)
		}
		return true, nil
	}, "the run's pods to be Ready and their endpoints published"); err != nil {
		return err
	}
	t.logf("pods ready, endpoints published; waiting for every node's proxy")
	for _, svc := range t.Services() {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 || !t.hasReadyEndpoints(svc) {
			continue
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil {
			continue
		}
		sp := svc.Spec.Ports[0]
		if sp.Protocol == corev1.ProtocolSCTP {
			continue
		}
		if ep, ok := t.endpointOf(svc, sp); ok {
			r := &dialRequester{t: t, pod: proberName(t.nodes[0].Name), port: proberPort}
			if res := r.Request(ctx, targetOf(ep, sp.Protocol), probeOptions()); res.Err != nil {
				// The endpoint itself does not answer: neither will the Service, synced or not.
				t.logf("Service %s: endpoint %s does not answer (%v); not waiting for the proxies", svc.Name, ep, res.Err)
				continue
			}
		}
		for _, n := range t.nodes {
			r := &dialRequester{t: t, pod: proberName(n.Name), port: proberPort}
			target := targetOf(netip.AddrPortFrom(ip, uint16(sp.Port)), sp.Protocol)
			if err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
				res := r.Request(ctx, target, probeOptions())
				return res.Err == nil, res.Err
			}, fmt.Sprintf("Service %s to answer from node %s", svc.Name, n.Name)); err != nil {
				return err
			}
			t.settle(ctx, r, target, svc, n.Name)
		}
	}
	return t.refresh(ctx)
}

// settleTimeout bounds the wait for a proxy to reach every endpoint of a Service.
const settleTimeout = 20 * time.Second

// settle waits, within settleTimeout, until the Service's answers from the node's
// prober came from every endpoint the node may reach: a proxy that answers may not have
// programmed the last endpoints yet (its syncs are rate-limited). After the timeout it
// goes on: the check then judges what the proxy does.
func (t *Target) settle(ctx context.Context, r *dialRequester, target probe.Destination, svc *corev1.Service, node string) {
	want := t.endpointPods(svc, node)
	if len(want) == 0 || t.opts.KeepImages {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	seen := map[string]bool{}
	tries := min(100, 5*len(want))
	err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		a, err := r.dial(ctx, target, probeOptions(), tries)
		if err != nil {
			return false, err
		}
		for _, resp := range a.Responses {
			seen[strings.TrimSpace(resp)] = true
		}
		for pod := range want {
			if !seen[pod] {
				return false, nil
			}
		}
		return true, nil
	}, "")
	if err != nil {
		t.logf("Service %s: node %s's proxy did not reach every endpoint within %s; checking anyway", svc.Name, node, settleTimeout)
	}
}

// endpointPods names the pods of the Service's ready endpoints that traffic from node
// may reach (its own node's only, for internalTrafficPolicy Local).
func (t *Target) endpointPods(svc *corev1.Service, node string) map[string]bool {
	local := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]bool{}
	for _, s := range t.slices {
		if s.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
				continue
			}
			if local && (ep.NodeName == nil || *ep.NodeName != node) {
				continue
			}
			out[ep.TargetRef.Name] = true
		}
	}
	return out
}

// notReady says what is not ready yet ("" when everything is).
func (t *Target) notReady() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := 2 * len(t.nodes)
	for _, o := range t.objects {
		switch v := o.(type) {
		case *corev1.Pod:
			want++
		case *appsv1.Deployment:
			if v.Spec.Replicas != nil {
				want += int(*v.Spec.Replicas)
			}
		}
	}
	ready := 0
	var waiting []string
	for _, p := range t.pods {
		if p.DeletionTimestamp == nil && podReady(p) {
			ready++
		} else if len(waiting) < 3 {
			waiting = append(waiting, p.Name+" ("+podWaitReason(p)+")")
		}
	}
	if ready < want {
		return fmt.Sprintf("%d/%d pods ready; not ready: %s", ready, want, strings.Join(waiting, ", "))
	}
	for _, svc := range t.services {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		pods := map[string]bool{}
		for _, p := range t.pods {
			if p.DeletionTimestamp == nil && podReady(p) && sel.Matches(labels.Set(p.Labels)) && p.Status.PodIP != "" {
				pods[p.Status.PodIP] = true
			}
		}
		eps := map[string]bool{}
		for _, s := range t.slices {
			if s.Labels[discoveryv1.LabelServiceName] != svc.Name {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					for _, a := range ep.Addresses {
						eps[a] = true
					}
				}
			}
		}
		if len(eps) != len(pods) {
			return fmt.Sprintf("Service %s: %d ready endpoints, %d ready pods", svc.Name, len(eps), len(pods))
		}
	}
	return ""
}

// endpointOf returns a ready endpoint of the Service's port sp (address and port).
func (t *Target) endpointOf(svc *corev1.Service, sp corev1.ServicePort) (netip.AddrPort, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.slices {
		if s.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		var port int32
		for _, p := range s.Ports {
			if p.Port != nil && (p.Name == nil && sp.Name == "" || p.Name != nil && *p.Name == sp.Name) {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			if ip, err := netip.ParseAddr(ep.Addresses[0]); err == nil {
				return netip.AddrPortFrom(ip, uint16(port)), true
			}
		}
	}
	return netip.AddrPort{}, false
}

func (t *Target) hasReadyEndpoints(svc *corev1.Service) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.slices {
		if s.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

// podWaitReason says why a pod is not ready: its phase, and a container's waiting reason
// or message.
func podWaitReason(p *corev1.Pod) string {
	r := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return r + ", " + cs.Name + ": " + strings.TrimSpace(w.Reason+" "+w.Message)
		}
	}
	if p.Status.Message != "" && p.Status.Phase != corev1.PodRunning {
		r += ": " + p.Status.Message
	}
	return r
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Services are the run's Services as last read.
func (t *Target) Services() []*corev1.Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*corev1.Service(nil), t.services...)
}

// EndpointSlices are the run's EndpointSlices as last read.
func (t *Target) EndpointSlices() []*discoveryv1.EndpointSlice {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*discoveryv1.EndpointSlice(nil), t.slices...)
}

// Hosts returns the nodes (KindNode) or the run's pods with a pod-network address
// (KindPod), in name order.
func (t *Target) Hosts(kind lab.HostKind) []lab.Host {
	switch kind {
	case lab.KindNode:
		return append([]lab.Host(nil), t.nodes...)
	case lab.KindPod:
		t.mu.Lock()
		defer t.mu.Unlock()
		var out []lab.Host
		for _, p := range t.pods {
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if err != nil || p.Spec.HostNetwork {
				continue
			}
			out = append(out, lab.Host{Name: p.Name, Kind: lab.KindPod, IP: ip, Node: p.Spec.NodeName, Labels: p.Labels})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	return nil
}

// InternalFrom is the node's prober pod.
func (t *Target) InternalFrom(node string) string { return proberName(node) }

// ExternalFrom is the hostNetwork prober of another node: traffic from outside the
// target node, as an external client's would be.
func (t *Target) ExternalFrom(node string) (string, string) {
	for _, n := range t.nodes {
		if n.Name != node {
			return hostProberName(n.Name), ""
		}
	}
	return "", "one node: no host outside " + node + " to send from (traffic from the node itself is local traffic, which the proxy treats differently)"
}

// ExternalIPFrom says why load-balancer and external IPs are not checked: kpbench sends
// from inside the cluster only, and such traffic needs a client outside it routed there.
func (t *Target) ExternalIPFrom(context.Context, netip.Addr) (string, string, error) {
	return "", "needs a client outside the cluster with a route to the IP; kpbench sends only from prober pods in the cluster", nil
}

// Requester returns the prober named host (a prober pod of the run).
func (t *Target) Requester(host string) (check.Requester, error) {
	for _, n := range t.nodes {
		switch host {
		case proberName(n.Name):
			return &dialRequester{t: t, pod: host, port: proberPort}, nil
		case hostProberName(n.Name):
			return &dialRequester{t: t, pod: host, port: hostProberPort(t.opts.RunID)}, nil
		}
	}
	return nil, fmt.Errorf("no prober %q in the run", host)
}

var _ check.Cluster = (*Target)(nil)
