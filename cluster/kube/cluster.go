package kube

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
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/lab"
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

// Options configure a Cluster.
type Options struct {
	// RunID names the run (namespace kpbench-<RunID>).
	RunID string
	// Workload options (the namespace and run id are set by the Cluster).
	Image      string
	KeepImages bool
	// MaxObjects bounds the objects and pods created (default DefaultMaxObjects).
	MaxObjects int
	// ReadyTimeout bounds WaitSynced: the wait for the pods, endpoints and proxies
	// (default 3 min).
	ReadyTimeout time.Duration
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// Cluster is a cluster reached through a kubeconfig as a cluster under test
// (cluster.Cluster), seen from one run's namespace: objects live in that namespace and
// are shown in the namespace the manifests gave them ("default" when none); the nodes
// are called node-0, node-1, ... in name order, as in a lab; probes go from prober pods
// through the API server (netexec's /dial). Close deletes the namespace.
type Cluster struct {
	client    kubernetes.Interface
	opts      Options
	namespace string
	version   string
	nodes     []lab.Host       // the cluster's Ready nodes, under their own names
	planned   []runtime.Object // the objects Start applies, as given
	objects   []runtime.Object // the same, as they will be created (Workload)
	notes     []string
	rv        atomic.Uint64

	mu          sync.Mutex
	created     bool
	services    []*corev1.Service
	slices      []*discoveryv1.EndpointSlice
	pods        []*corev1.Pod
	deployments []*appsv1.Deployment

	nsMu sync.Mutex
	ns   map[string]string // kind/name → the namespace the manifests gave the object
}

var _ cluster.Cluster = (*Cluster)(nil)

// New reads the cluster's version and nodes and plans the run's objects, objs, which
// Start creates (nothing is created yet). A plan above MaxObjects is refused
// (ErrBadConfig).
func New(ctx context.Context, client kubernetes.Interface, objs []runtime.Object, o Options) (*Cluster, error) {
	if o.MaxObjects == 0 {
		o.MaxObjects = DefaultMaxObjects
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 3 * time.Minute
	}
	c := &Cluster{client: client, opts: o, namespace: "kpbench-" + o.RunID, planned: objs}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("cluster: server version: %w", err)
	}
	c.version = v.GitVersion
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
				c.nodes = append(c.nodes, lab.Host{Name: n.Name, Kind: lab.KindNode, IP: ip})
				break
			}
		}
	}
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].Name < c.nodes[j].Name })
	if len(c.nodes) == 0 {
		return nil, errors.New("cluster: no Ready, schedulable node with an IPv4 InternalIP")
	}
	c.objects, c.notes, err = Workload(objs, c.workloadOptions())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if n := c.ObjectCount(); n > o.MaxObjects {
		return nil, fmt.Errorf("%w: the run would create %d objects and pods, more than --max-objects %d", ErrBadConfig, n, o.MaxObjects)
	}
	return c, nil
}

// workloadOptions say how manifests become the run's objects: moved into its namespace,
// labelled with the run, containers replaced by netexec (unless KeepImages), which also
// serves in a container that declares no port, so that every pod can send probes.
func (c *Cluster) workloadOptions() WorkloadOptions {
	return WorkloadOptions{Namespace: c.namespace, RunID: c.opts.RunID, Image: c.opts.Image, KeepImages: c.opts.KeepImages, IdlePort: idlePort}
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
func (c *Cluster) Namespace() string { return c.namespace }

// ServerVersion is the API server's version.
func (c *Cluster) ServerVersion() string { return c.version }

// Nodes are the cluster's Ready nodes, in name order.
func (c *Cluster) Nodes() []lab.Host { return c.nodes }

// Notes say how the manifests were changed (images replaced, volumes dropped).
func (c *Cluster) Notes() []string { return c.notes }

// ObjectCount is the number of objects the run creates, pods of Deployments included:
// the namespace, two probers per node and the workload.
func (c *Cluster) ObjectCount() int {
	n := 1 + 2*len(c.nodes)
	for _, o := range c.objects {
		n++
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			n += int(*d.Spec.Replicas)
		}
	}
	return n
}

// Plan lists what Start would create, one line each (the dry run).
func (c *Cluster) Plan(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s, %d nodes; would create %d objects and pods:\n", c.version, len(c.nodes), c.ObjectCount())
	fmt.Fprintf(&b, "  Namespace %s (label %s=%s)\n", c.namespace, RunLabel, c.opts.RunID)
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "  Pod %s/%s on %s (prober, %s netexec :%d)\n", c.namespace, proberName(n.Name), n.Name, c.image(), proberPort)
		fmt.Fprintf(&b, "  Pod %s/%s on %s (hostNetwork prober, netexec on the node's :%d)\n", c.namespace, hostProberName(n.Name), n.Name, hostProberPort(c.opts.RunID))
	}
	for _, o := range c.objects {
		m := o.(metav1.Object)
		extra := ""
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			extra = fmt.Sprintf(" (%d pods)", *d.Spec.Replicas)
		}
		fmt.Fprintf(&b, "  %s %s/%s%s\n", kindOf(o), m.GetNamespace(), m.GetName(), extra)
	}
	for _, n := range c.notes {
		fmt.Fprintf(&b, "  change: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (c *Cluster) image() string {
	if c.opts.Image != "" {
		return c.opts.Image
	}
	return upstream.AgnhostImage
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Log != nil {
		fmt.Fprintf(c.opts.Log, "[%s cluster] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

func proberName(node string) string     { return "kpb-prober-" + node }
func hostProberName(node string) string { return "kpb-hprober-" + node }

// Start creates the namespace, the probers and the planned objects (New's objs, through
// Apply). Whatever it created is removed by Close, also when Start fails.
func (c *Cluster) Start(ctx context.Context) error {
	host, _ := os.Hostname()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        c.namespace,
		Labels:      map[string]string{RunLabel: c.opts.RunID},
		Annotations: map[string]string{OwnerAnnotation: host + "/" + strconv.Itoa(os.Getpid())},
	}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", c.namespace, err)
	}
	c.mu.Lock()
	c.created = true
	c.mu.Unlock()
	c.logf("namespace %s created", c.namespace)
	for _, n := range c.nodes {
		for _, p := range []*corev1.Pod{c.prober(n.Name, false), c.prober(n.Name, true)} {
			if _, err := c.client.CoreV1().Pods(c.namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create prober %s: %w", p.Name, err)
			}
		}
	}
	if len(c.planned) > 0 {
		return c.Apply(ctx, c.planned...)
	}
	return nil
}

func (c *Cluster) prober(node string, hostNetwork bool) *corev1.Pod {
	name, port := proberName(node), int32(proberPort)
	if hostNetwork {
		name, port = hostProberName(node), hostProberPort(c.opts.RunID)
	}
	no := false
	one := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.namespace, Labels: map[string]string{RunLabel: c.opts.RunID, "kpbench.dev/role": "prober"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			HostNetwork:                   hostNetwork,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &one,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "netexec", Image: c.image(), ImagePullPolicy: corev1.PullIfNotPresent,
				Args:           []string{"netexec", "--http-port=" + strconv.Itoa(int(port)), "--udp-port=-1"},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstrPort(port)}}, PeriodSeconds: 1},
			}},
		},
	}
}

func (c *Cluster) create(ctx context.Context, o runtime.Object) error {
	var err error
	ns := c.namespace
	switch v := o.(type) {
	case *corev1.Service:
		_, err = c.client.CoreV1().Services(ns).Create(ctx, v, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = c.client.CoreV1().Pods(ns).Create(ctx, v, metav1.CreateOptions{})
	case *appsv1.Deployment:
		_, err = c.client.AppsV1().Deployments(ns).Create(ctx, v, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = c.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, v, metav1.CreateOptions{})
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
func (c *Cluster) Close(ctx context.Context, timeout time.Duration) error {
	c.mu.Lock()
	created := c.created
	c.mu.Unlock()
	if !created {
		return nil
	}
	return DeleteNamespace(ctx, c.client, c.namespace, timeout)
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
