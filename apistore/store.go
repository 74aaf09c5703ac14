// Package apistore is an in-memory API store: it stands in for a control plane where no real
// one runs, holding Services, Pods, Deployments and EndpointSlices with the parts of the API
// server and controller manager that a Service proxy depends on. The testbed's own proxies
// read it; for upstream kube-proxy, kubestack/controlplane mirrors it into a real API
// server (Publish); `cluster up` has a real control plane and no API store.
//
//   - Allocators, as the API server runs them: ClusterIPs from the service CIDR, node ports
//     from the node port range, health-check node ports, and load-balancer ingress IPs from
//     a pool (what a cloud load-balancer controller would write into the status).
//   - A deployment controller that turns Deployments into Pods, and a scheduler that spreads
//     Pods over the configured nodes.
//   - The EndpointSlice controller, run synchronously: every mutation recomputes the
//     affected EndpointSlices under the same lock, so results are deterministic.
//   - A change feed (Watch) with the semantics of an informer: a snapshot, then every
//     change in order.
//
// The lab plays the kubelet: it watches the Pods this package schedules, creates them in
// their node's namespace, and reports their IP and readiness back with SetPodStatus.
//
// Objects handed to Apply are expected to be validated and defaulted already (manifest
// does that); this package checks what the API server's registry checks on top: references,
// allocation conflicts and immutable fields. Only IPv4 is supported.
package apistore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Kind names an object type of the store, as it appears in manifests.
type Kind string

// The kinds the store holds.
const (
	KindService       Kind = "Service"
	KindPod           Kind = "Pod"
	KindDeployment    Kind = "Deployment"
	KindEndpointSlice Kind = "EndpointSlice"
)

// kinds lists every Kind in snapshot order.
var kinds = [...]Kind{KindDeployment, KindPod, KindService, KindEndpointSlice}

// ErrNotFound is returned (wrapped) when an object named in a call does not exist.
var ErrNotFound = errors.New("not found")

// Defaults of Config, those of a kubeadm cluster (the pool is kind's usual docker network).
var (
	DefaultServiceCIDR      = netip.MustParsePrefix("10.96.0.0/12")
	DefaultLoadBalancerPool = netip.MustParsePrefix("172.18.1.0/24")
)

// Default node port range, the API server's --service-node-port-range.
const (
	DefaultNodePortMin int32 = 30000
	DefaultNodePortMax int32 = 32767
)

// Node is one node of the lab cluster.
type Node struct {
	// Name is the node's name (pods' spec.nodeName, EndpointSlice nodeName).
	Name string
	// IP is the node's address (informational here; the lab routes to it).
	IP netip.Addr
	// Zone is the node's topology.kubernetes.io/zone ("" for none); copied into the
	// EndpointSlice entries of the pods on the node.
	Zone string
}

// Config configures a Store. Zero fields take the defaults documented on each field.
type Config struct {
	// ServiceCIDR is the range ClusterIPs come from (default 10.96.0.0/12, IPv4 only).
	ServiceCIDR netip.Prefix
	// NodePortMin and NodePortMax bound node ports, inclusive (default 30000-32767).
	NodePortMin, NodePortMax int32
	// LoadBalancerPool is the range load-balancer ingress IPs come from
	// (default 172.18.1.0/24).
	LoadBalancerPool netip.Prefix
	// Nodes are the cluster's nodes, in scheduling order. With no nodes, pods stay
	// unscheduled.
	Nodes []Node
	// Clock gives the time for timestamps (default time.Now).
	Clock func() time.Time
}

// withDefaults returns c with the zero fields defaulted.
func (c Config) withDefaults() Config {
	if !c.ServiceCIDR.IsValid() {
		c.ServiceCIDR = DefaultServiceCIDR
	}
	if c.NodePortMin == 0 && c.NodePortMax == 0 {
		c.NodePortMin, c.NodePortMax = DefaultNodePortMin, DefaultNodePortMax
	}
	if !c.LoadBalancerPool.IsValid() {
		c.LoadBalancerPool = DefaultLoadBalancerPool
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.Nodes = slices.Clone(c.Nodes)
	return c
}

// objKey identifies an object within its kind.
type objKey struct{ ns, name string }

func (k objKey) String() string { return k.ns + "/" + k.name }

// object is what every stored type implements.
type object interface {
	runtime.Object
	metav1.Object
}

// podInfo is what the store remembers about a pod beyond the object.
type podInfo struct {
	seq   uint64 // creation order, for "newest first"
	owner string // name of the owning Deployment ("" for a bare pod)
}

// counters are the store's sequence numbers, saved and restored around a failed Apply.
type counters struct {
	rv, uid, podSeq, names uint64
}

// Store is the API store. It is safe for concurrent use.
type Store struct {
	mu        sync.Mutex
	cfg       Config
	nodeIndex map[string]int
	nodePods  []int // number of pods per node, by index in cfg.Nodes
	cnt       counters

	objs      map[Kind]map[objKey]object
	podInfo   map[objKey]podInfo
	podIndex  map[objKey]uint64              // next pod name index per Deployment
	podIdx    labelIndex                     // pods by label pair
	svcIdx    labelIndex                     // services by selector pair
	svcSlices map[objKey]map[string]struct{} // managed EndpointSlice names by service

	clusterIPs *ipAllocator
	lbIPs      *ipAllocator
	nodePorts  *portAllocator

	subs map[*subscriber]struct{}
}

// New returns an empty cluster configured by cfg.
func New(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	c := &Store{
		cfg:       cfg,
		nodeIndex: make(map[string]int, len(cfg.Nodes)),
		nodePods:  make([]int, len(cfg.Nodes)),
		objs:      make(map[Kind]map[objKey]object, len(kinds)),
		podInfo:   map[objKey]podInfo{},
		podIndex:  map[objKey]uint64{},
		podIdx:    labelIndex{},
		svcIdx:    labelIndex{},
		svcSlices: map[objKey]map[string]struct{}{},
		subs:      map[*subscriber]struct{}{},
	}
	for _, k := range kinds {
		c.objs[k] = map[objKey]object{}
	}
	for i, n := range cfg.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("new cluster: node %d has no name", i)
		}
		if _, dup := c.nodeIndex[n.Name]; dup {
			return nil, fmt.Errorf("new cluster: node name %q used twice", n.Name)
		}
		c.nodeIndex[n.Name] = i
	}
	var err error
	if c.clusterIPs, err = newIPAllocator(cfg.ServiceCIDR, true); err != nil {
		return nil, fmt.Errorf("new cluster: service CIDR: %w", err)
	}
	if c.lbIPs, err = newIPAllocator(cfg.LoadBalancerPool, false); err != nil {
		return nil, fmt.Errorf("new cluster: load-balancer pool: %w", err)
	}
	if c.nodePorts, err = newPortAllocator(cfg.NodePortMin, cfg.NodePortMax); err != nil {
		return nil, fmt.Errorf("new cluster: node ports: %w", err)
	}
	return c, nil
}

// Nodes returns the configured nodes.
func (c *Store) Nodes() []Node { return slices.Clone(c.cfg.Nodes) }

// ResourceVersion returns the store's current resource version: that of the last change.
func (c *Store) ResourceVersion() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cnt.rv
}

// Len returns the number of stored objects of kind.
func (c *Store) Len(kind Kind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.objs[kind])
}

// list returns deep copies of the objects of kind, sorted by namespace and name.
func list[T object](c *Store, kind Kind) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := sortedKeys(c.objs[kind])
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, c.objs[kind][k].DeepCopyObject().(T))
	}
	return out
}

func sortedKeys[V any](m map[objKey]V) []objKey {
	keys := make([]objKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b objKey) int {
		if c := strings.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return keys
}

// Services returns deep copies of all Services, sorted by namespace and name.
func (c *Store) Services() []*corev1.Service { return list[*corev1.Service](c, KindService) }

// Pods returns deep copies of all Pods, sorted by namespace and name.
func (c *Store) Pods() []*corev1.Pod { return list[*corev1.Pod](c, KindPod) }

// Deployments returns deep copies of all Deployments, sorted by namespace and name.
func (c *Store) Deployments() []*appsv1.Deployment {
	return list[*appsv1.Deployment](c, KindDeployment)
}

// EndpointSlices returns deep copies of all EndpointSlices (managed and user-supplied),
// sorted by namespace and name.
func (c *Store) EndpointSlices() []*discoveryv1.EndpointSlice {
	return list[*discoveryv1.EndpointSlice](c, KindEndpointSlice)
}

// Get returns a deep copy of one object, or an error wrapping ErrNotFound.
func (c *Store) Get(kind Kind, namespace, name string) (runtime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.objs[kind]
	if !ok {
		return nil, fmt.Errorf("get %s: unknown kind", kind)
	}
	o, ok := m[objKey{defaultNS(namespace), name}]
	if !ok {
		return nil, fmt.Errorf("get %s %s/%s: %w", kind, defaultNS(namespace), name, ErrNotFound)
	}
	return o.DeepCopyObject(), nil
}

// userCopy returns a copy of an object a user applies, in the default namespace when it
// names none; an object without a name is refused.
func userCopy[T interface {
	metav1.Object
	DeepCopy() T
}](in T) (T, error) {
	if in.GetName() == "" {
		var none T
		return none, fmt.Errorf("metadata.name is required")
	}
	out := in.DeepCopy()
	out.SetNamespace(defaultNS(out.GetNamespace()))
	return out, nil
}

func defaultNS(ns string) string {
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// kindOf returns the Kind of a typed object, or "" for types the store does not hold.
func kindOf(o runtime.Object) Kind {
	switch o.(type) {
	case *corev1.Service:
		return KindService
	case *corev1.Pod:
		return KindPod
	case *appsv1.Deployment:
		return KindDeployment
	case *discoveryv1.EndpointSlice:
		return KindEndpointSlice
	}
	return ""
}

// Apply creates or updates objs as one transaction, like `kubectl apply` of one file
// against an API server that would commit all or nothing: the objects are applied in order,
// each validated against the store and allocated its IPs and ports, then the EndpointSlices
// of every affected Service are recomputed. If any object fails, nothing of the call is
// stored or allocated and no event is sent.
//
// Accepted types: *corev1.Service, *corev1.Pod, *appsv1.Deployment and
// *discoveryv1.EndpointSlice (user-supplied slices, for Services without a selector).
// An update keeps what the API server keeps: ClusterIP, node ports, health-check node port
// and load-balancer IP stay allocated unless the new spec changes them; a Pod's status
// stays as the kubelet (SetPodStatus) set it. The objects passed in are not modified.
func (c *Store) Apply(ctx context.Context, objs ...runtime.Object) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return c.transact(func(t *tx) error {
		for i, o := range objs {
			var err error
			switch o := o.(type) {
			case *corev1.Service:
				err = t.applyService(o)
			case *corev1.Pod:
				err = t.applyPod(o)
			case *appsv1.Deployment:
				err = t.applyDeployment(o)
			case *discoveryv1.EndpointSlice:
				err = t.applySlice(o)
			default:
				err = fmt.Errorf("unsupported type %T", o)
			}
			if err != nil {
				return fmt.Errorf("apply object %d (%s): %w", i, describe(o), err)
			}
		}
		return nil
	})
}

// describe names an object for error messages: "Service default/web".
func describe(o runtime.Object) string {
	k := kindOf(o)
	m, ok := o.(metav1.Object)
	if k == "" || !ok {
		return fmt.Sprintf("%T", o)
	}
	return fmt.Sprintf("%s %s/%s", k, defaultNS(m.GetNamespace()), m.GetName())
}

// Delete removes one object. Deleting a Service releases its IPs and ports and removes its
// managed EndpointSlices; deleting a Deployment removes its Pods; deleting a Pod of a
// Deployment makes the Deployment create a replacement, as its ReplicaSet would; deleting a
// managed EndpointSlice makes the controller recreate it (under a new name).
func (c *Store) Delete(ctx context.Context, kind Kind, namespace, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	key := objKey{defaultNS(namespace), name}
	return c.transact(func(t *tx) error {
		m, ok := c.objs[kind]
		if !ok {
			return fmt.Errorf("delete %s %s: unknown kind", kind, key)
		}
		if _, ok := m[key]; !ok {
			return fmt.Errorf("delete %s %s: %w", kind, key, ErrNotFound)
		}
		switch kind {
		case KindService:
			t.deleteService(key)
		case KindPod:
			owner := c.podInfo[key].owner
			t.deletePod(key)
			if owner != "" {
				t.reconcileDeployment(objKey{key.ns, owner})
			}
		case KindDeployment:
			t.deleteDeployment(key)
		case KindEndpointSlice:
			s := m[key].(*discoveryv1.EndpointSlice)
			t.remove(KindEndpointSlice, key)
			if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
				t.dirty[objKey{key.ns, svc}] = true
			}
		}
		return nil
	})
}

// PodStatus is what the kubelet (the lab) reports about a pod.
type PodStatus struct {
	// IP is the pod's address (invalid: none yet). A pod with an IP is Running.
	IP netip.Addr
	// Ready is the pod's Ready condition.
	Ready bool
	// Terminating marks the pod as being deleted (deletionTimestamp set, pod still present).
	// Like in Kubernetes it cannot be undone: false leaves a terminating pod terminating.
	Terminating bool
}

// SetPodStatus records what the kubelet observed about a pod: its IP, readiness and
// termination. The lab calls it once it created the pod (IP, Ready true); scenarios call it
// to make pods unready or terminating. A Deployment replaces a terminating pod at once, as
// a ReplicaSet does (terminating pods are not counted as replicas).
func (c *Store) SetPodStatus(namespace, name string, st PodStatus) error {
	key := objKey{defaultNS(namespace), name}
	if st.IP.IsValid() && !st.IP.Is4() {
		return fmt.Errorf("set status of pod %s: %v is not an IPv4 address", key, st.IP)
	}
	return c.transact(func(t *tx) error {
		o, ok := c.objs[KindPod][key]
		if !ok {
			return fmt.Errorf("set status of pod %s: %w", key, ErrNotFound)
		}
		t.setPodStatus(o.(*corev1.Pod), st)
		return nil
	})
}

// MarkTerminating sets a pod's deletionTimestamp, keeping its IP and readiness: the state of
// a pod between `kubectl delete` and the end of its grace period.
func (c *Store) MarkTerminating(namespace, name string) error {
	key := objKey{defaultNS(namespace), name}
	return c.transact(func(t *tx) error {
		o, ok := c.objs[KindPod][key]
		if !ok {
			return fmt.Errorf("mark pod %s terminating: %w", key, ErrNotFound)
		}
		p := o.(*corev1.Pod)
		st := PodStatus{Ready: PodReady(p), Terminating: true}
		if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			st.IP = ip
		}
		t.setPodStatus(p, st)
		return nil
	})
}

// ScaleDeployment sets a Deployment's replicas, creating pods or removing the newest first.
func (c *Store) ScaleDeployment(namespace, name string, replicas int32) error {
	key := objKey{defaultNS(namespace), name}
	if replicas < 0 {
		return fmt.Errorf("scale deployment %s: negative replicas %d", key, replicas)
	}
	return c.transact(func(t *tx) error {
		o, ok := c.objs[KindDeployment][key]
		if !ok {
			return fmt.Errorf("scale deployment %s: %w", key, ErrNotFound)
		}
		d := o.(*appsv1.Deployment).DeepCopy()
		d.Spec.Replicas = &replicas
		d.Status.Replicas = replicas
		t.put(KindDeployment, d)
		t.reconcileDeployment(key)
		return nil
	})
}

// tx is one all-or-nothing mutation of the store. Every write goes through put/remove,
// which record how to undo it and which event to send once the transaction commits.
// Stored objects are never modified in place: a write replaces the pointer, so events and
// snapshots may share stored objects until a subscriber deep-copies them.
type tx struct {
	c      *Store
	now    metav1.Time
	undo   []func()
	events []Event
	dirty  map[objKey]bool // Services whose EndpointSlices must be recomputed
}

// transact runs f under the store lock; on error it undoes everything f did.
func (c *Store) transact(f func(*tx) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &tx{c: c, now: metav1.NewTime(c.cfg.Clock()), dirty: map[objKey]bool{}}
	saved := c.cnt
	err := f(t)
	if err == nil {
		t.syncEndpoints()
	}
	if err != nil {
		for i := len(t.undo) - 1; i >= 0; i-- {
			t.undo[i]()
		}
		c.cnt = saved
		return err
	}
	c.publish(t.events)
	return nil
}

// onUndo records f to run if the transaction fails.
func (t *tx) onUndo(f func()) { t.undo = append(t.undo, f) }

// put stores o (a new pointer the caller owns), setting the server-side metadata:
// resourceVersion always, uid and creationTimestamp on create (kept from the stored object
// on update).
func (t *tx) put(kind Kind, o object) {
	c := t.c
	key := objKey{o.GetNamespace(), o.GetName()}
	old, exists := c.objs[kind][key]
	c.cnt.rv++
	o.SetResourceVersion(strconv.FormatUint(c.cnt.rv, 10))
	typ := Added
	if exists {
		typ = Modified
		o.SetUID(old.GetUID())
		o.SetCreationTimestamp(old.GetCreationTimestamp())
	} else {
		c.cnt.uid++
		o.SetUID(types.UID(newUID(c.cnt.uid)))
		o.SetCreationTimestamp(t.now)
	}
	c.set(kind, key, old, o)
	t.onUndo(func() { c.set(kind, key, o, old) })
	t.events = append(t.events, Event{Type: typ, Kind: kind, Namespace: key.ns, Name: key.name,
		Object: o, ResourceVersion: c.cnt.rv})
}

// remove deletes an object; the Deleted event carries its last state.
func (t *tx) remove(kind Kind, key objKey) {
	c := t.c
	old, ok := c.objs[kind][key]
	if !ok {
		return
	}
	c.cnt.rv++
	c.set(kind, key, old, nil)
	t.onUndo(func() { c.set(kind, key, nil, old) })
	t.events = append(t.events, Event{Type: Deleted, Kind: kind, Namespace: key.ns, Name: key.name,
		Object: old, ResourceVersion: c.cnt.rv})
}

// set replaces old by o (either may be nil) in the maps and indexes.
func (c *Store) set(kind Kind, key objKey, old, o object) {
	if o == nil {
		delete(c.objs[kind], key)
	} else {
		c.objs[kind][key] = o
	}
	switch kind {
	case KindPod:
		if old != nil {
			c.podIdx.remove(key, old.GetLabels())
			if i, ok := c.nodeIndex[old.(*corev1.Pod).Spec.NodeName]; ok {
				c.nodePods[i]--
			}
		}
		if o != nil {
			c.podIdx.add(key, o.GetLabels())
			if i, ok := c.nodeIndex[o.(*corev1.Pod).Spec.NodeName]; ok {
				c.nodePods[i]++
			}
		}
	case KindService:
		if old != nil {
			c.svcIdx.remove(key, old.(*corev1.Service).Spec.Selector)
		}
		if o != nil {
			c.svcIdx.add(key, o.(*corev1.Service).Spec.Selector)
		}
	case KindEndpointSlice:
		if old != nil && isManaged(old.GetLabels()) {
			svc := objKey{key.ns, old.GetLabels()[discoveryv1.LabelServiceName]}
			delete(c.svcSlices[svc], key.name)
			if len(c.svcSlices[svc]) == 0 {
				delete(c.svcSlices, svc)
			}
		}
		if o != nil && isManaged(o.GetLabels()) {
			svc := objKey{key.ns, o.GetLabels()[discoveryv1.LabelServiceName]}
			if c.svcSlices[svc] == nil {
				c.svcSlices[svc] = map[string]struct{}{}
			}
			c.svcSlices[svc][key.name] = struct{}{}
		}
	}
}

// newUID returns a deterministic, well-formed UID for sequence number n.
func newUID(n uint64) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", n)
}

// labelIndex finds objects by one label pair: namespace → "key=value" → names.
type labelIndex map[string]map[string]map[string]struct{}

func pair(k, v string) string { return k + "=" + v }

func (ix labelIndex) add(key objKey, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	byPair := ix[key.ns]
	if byPair == nil {
		byPair = map[string]map[string]struct{}{}
		ix[key.ns] = byPair
	}
	for k, v := range labels {
		p := pair(k, v)
		if byPair[p] == nil {
			byPair[p] = map[string]struct{}{}
		}
		byPair[p][key.name] = struct{}{}
	}
}

func (ix labelIndex) remove(key objKey, labels map[string]string) {
	byPair := ix[key.ns]
	for k, v := range labels {
		p := pair(k, v)
		delete(byPair[p], key.name)
		if len(byPair[p]) == 0 {
			delete(byPair, p)
		}
	}
}

// candidates returns the names in ns carrying every pair of sel, or nil. It starts from the
// smallest set of one pair and checks the rest with match.
func (ix labelIndex) candidates(ns string, sel map[string]string) map[string]struct{} {
	var best map[string]struct{}
	for k, v := range sel {
		s := ix[ns][pair(k, v)]
		if len(s) == 0 {
			return nil
		}
		if best == nil || len(s) < len(best) {
			best = s
		}
	}
	return best
}

// matches reports whether labels satisfy the equality selector sel (non-empty).
func matches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}
