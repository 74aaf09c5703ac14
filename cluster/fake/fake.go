// Package fake is a cluster under test in memory, for unit tests of the engine: no
// namespaces, no kernel, no root. Its objects are kept in a map (Services get a
// ClusterIP, Pods an IP and a Ready condition; a selector Service gets an EndpointSlice
// of its ready pods); its hosts are names with addresses; its probers answer from the
// endpoints of the Service a probe is sent to, each endpoint in turn (or as Choose
// says), and are refused when there is none; its proxies, one per node, record a sync
// each time WaitSynced finds a change they have not seen.
package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/apistore"
	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// Cluster is an in-memory cluster under test. Make it with New.
type Cluster struct {
	// Choose picks the endpoint pod that answers a probe among the Service's ready
	// endpoint pods (sorted), given how many probes that Service answered before (nil:
	// each in turn). Set it before the first probe.
	Choose func(pods []string, n int) string

	mu      sync.Mutex
	objects map[string]runtime.Object // "Kind/namespace/name" → object
	hosts   map[string]lab.Host
	rv      uint64
	ips     int // addresses handed out so far
	answers map[netip.AddrPort]int
	proxies []*Proxy
}

var _ cluster.Cluster = (*Cluster)(nil)

// New returns a cluster with nodes nodes (node-N), clients external clients
// (client-N) and a probe pod per node (probe-node-N).
func New(nodes, clients int) *Cluster {
	c := &Cluster{objects: map[string]runtime.Object{}, hosts: map[string]lab.Host{}, answers: map[netip.AddrPort]int{}}
	for i := range nodes {
		n := lab.NodeName(i)
		c.hosts[n] = lab.Host{Name: n, Kind: lab.KindNode, IP: netip.AddrFrom4([4]byte{192, 168, 0, byte(10 + i)})}
		c.hosts["probe-"+n] = lab.Host{Name: "probe-" + n, Kind: lab.KindPod, IP: c.nextIP(), Node: n, Ready: true}
		c.proxies = append(c.proxies, &Proxy{node: n})
	}
	for j := range clients {
		n := lab.ClientName(j)
		c.hosts[n] = lab.Host{Name: n, Kind: lab.KindClient, IP: netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + j)})}
	}
	return c
}

// nextIP hands out the next pod address (10.244.0.0/16).
func (c *Cluster) nextIP() netip.Addr {
	c.ips++
	return netip.AddrFrom4([4]byte{10, 244, byte(c.ips >> 8), byte(c.ips)})
}

func key(kind, namespace, name string) string {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return kind + "/" + namespace + "/" + name
}

// Apply stores the objects (Service, Pod, EndpointSlice), giving Services a ClusterIP
// (10.96.0.0/16) and Pods an address and a Ready condition.
func (c *Cluster) Apply(_ context.Context, objs ...runtime.Object) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range objs {
		o = o.DeepCopyObject()
		m := o.(metav1.Object)
		if m.GetNamespace() == "" {
			m.SetNamespace(metav1.NamespaceDefault)
		}
		var kind string
		switch v := o.(type) {
		case *corev1.Service:
			kind = "Service"
			if v.Spec.ClusterIP == "" {
				c.ips++
				v.Spec.ClusterIP = netip.AddrFrom4([4]byte{10, 96, byte(c.ips >> 8), byte(c.ips)}).String()
			}
		case *corev1.Pod:
			kind = "Pod"
			ip := c.nextIP()
			v.Status.PodIP = ip.String()
			v.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			c.hosts[v.Name] = lab.Host{Name: v.Name, Kind: lab.KindPod, IP: ip, Node: v.Spec.NodeName, Labels: v.Labels, Ready: true}
		case *discoveryv1.EndpointSlice:
			kind = "EndpointSlice"
		default:
			return fmt.Errorf("fake: apply %T: kind not supported", o)
		}
		c.objects[key(kind, m.GetNamespace(), m.GetName())] = o
	}
	c.rv++
	return nil
}

// Delete removes one object.
func (c *Cluster) Delete(_ context.Context, kind, namespace, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key(kind, namespace, name)
	if _, ok := c.objects[k]; !ok {
		return fmt.Errorf("fake: no %s", k)
	}
	delete(c.objects, k)
	if kind == "Pod" {
		delete(c.hosts, name)
	}
	c.rv++
	return nil
}

// Get returns one object (EndpointSlices as EndpointSlices lists them).
func (c *Cluster) Get(kind, namespace, name string) (runtime.Object, error) {
	if kind == "EndpointSlice" {
		for _, s := range c.EndpointSlices() {
			if s.Namespace == namespace && s.Name == name {
				return s, nil
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.objects[key(kind, namespace, name)]; ok {
		return o.DeepCopyObject(), nil
	}
	return nil, fmt.Errorf("fake: no %s", key(kind, namespace, name))
}

// list returns copies of the objects of one type, in key order.
func list[T runtime.Object](c *Cluster) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []T
	for _, k := range slices.Sorted(maps.Keys(c.objects)) {
		if v, ok := c.objects[k].DeepCopyObject().(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// Services lists the Services.
func (c *Cluster) Services() []*corev1.Service { return list[*corev1.Service](c) }

// Pods lists the Pods.
func (c *Cluster) Pods() []*corev1.Pod { return list[*corev1.Pod](c) }

// EndpointSlices lists the applied EndpointSlices and, for every selector Service, one
// of its pods (ready or not, as their condition says) on the Service's target ports.
func (c *Cluster) EndpointSlices() []*discoveryv1.EndpointSlice {
	out := list[*discoveryv1.EndpointSlice](c)
	pods := c.Pods()
	for _, svc := range c.Services() {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svc.Name + "-fake", Namespace: svc.Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for _, sp := range svc.Spec.Ports {
			name, proto, port := sp.Name, sp.Protocol, sp.Port
			if sp.TargetPort.IntVal != 0 {
				port = sp.TargetPort.IntVal
			}
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, p := range pods {
			if p.Namespace != svc.Namespace || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			ready := apistore.PodReady(p)
			node := p.Spec.NodeName
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses: []string{p.Status.PodIP}, NodeName: &node,
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name},
			})
		}
		out = append(out, s)
	}
	return out
}

// ScaleDeployment is not available: the fake runs no Deployment controller.
func (c *Cluster) ScaleDeployment(context.Context, string, string, int32) error {
	return fmt.Errorf("fake: scale: %w", cluster.ErrNotAvailable)
}

// SetPodConditions sets a pod's Ready condition (termination is not kept).
func (c *Cluster) SetPodConditions(_ context.Context, namespace, name string, ready, _ *bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.objects[key("Pod", namespace, name)].(*corev1.Pod)
	if !ok {
		return fmt.Errorf("fake: no pod %s/%s", namespace, name)
	}
	if ready != nil {
		st := corev1.ConditionFalse
		if *ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		h := c.hosts[name]
		h.Ready = *ready
		c.hosts[name] = h
	}
	c.rv++
	return nil
}

// ResourceVersion counts the changes.
func (c *Cluster) ResourceVersion() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rv
}

// Host returns a host by name.
func (c *Cluster) Host(name string) (lab.Host, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[name]
	return h, ok
}

// Hosts returns the hosts of one kind, in name order.
func (c *Cluster) Hosts(kind lab.HostKind) []lab.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []lab.Host
	for _, h := range c.hosts {
		if h.Kind == kind {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b lab.Host) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PodHost returns a pod's host (pod names are unique across namespaces here).
func (c *Cluster) PodHost(_, name string) (lab.Host, bool) {
	h, ok := c.Host(name)
	return h, ok && h.Kind == lab.KindPod
}

// ProbeHost names the node's probe pod.
func (c *Cluster) ProbeHost(node string) string { return "probe-" + node }

// AddPod adds a pod host that is no object.
func (c *Cluster) AddPod(_ context.Context, name, node string) (lab.Host, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := lab.Host{Name: name, Kind: lab.KindPod, IP: c.nextIP(), Node: node, Ready: true}
	c.hosts[name] = h
	return h, nil
}

// AddClientRoute does nothing: every address is reachable from everywhere.
func (c *Cluster) AddClientRoute(context.Context, netip.Prefix) error { return nil }

// ClientFor is the client itself.
func (c *Cluster) ClientFor(client, _ string) (lab.Host, string, error) {
	h, ok := c.Host(client)
	if !ok {
		return lab.Host{}, "", fmt.Errorf("fake: no host %q", client)
	}
	return h, "", nil
}

// Prober returns a prober of the host.
func (c *Cluster) Prober(host string) (cluster.Prober, error) { return c.NewProber(host, 1) }

// NewProber returns a prober of the host.
func (c *Cluster) NewProber(host string, _ int) (cluster.ProberCloser, error) {
	h, ok := c.Host(host)
	if !ok {
		return nil, fmt.Errorf("fake: no host %q", host)
	}
	return prober{c: c, from: h}, nil
}

// answer is who answers dst: a ready endpoint of the Service port at dst (a ClusterIP
// or a node's address with a node port), or the pod at dst; refused when the Service has
// no ready endpoint; timeout when nothing is at dst.
func (c *Cluster) answer(dst probe.Destination) (echo.Answer, probe.ErrClass) {
	state := backends.BuildState(backends.NodeView{}, backends.ViewOptions{}, c.Services(), c.EndpointSlices())
	var nodes []netip.Addr
	for _, n := range c.Hosts(lab.KindNode) {
		nodes = append(nodes, n.IP)
	}
	for _, sp := range state.Services {
		byClusterIP := sp.ClusterIP == dst.Addr.Addr() && uint16(sp.Port) == dst.Addr.Port()
		byNodePort := sp.NodePort != 0 && uint16(sp.NodePort) == dst.Addr.Port() && slices.Contains(nodes, dst.Addr.Addr())
		if !byClusterIP && !byNodePort {
			continue
		}
		var pods []string
		for _, ep := range backends.CategorizeEndpoints(sp).Cluster {
			for _, h := range c.Hosts(lab.KindPod) {
				if h.IP == ep.IP {
					pods = append(pods, h.Name)
				}
			}
		}
		if len(pods) == 0 {
			return echo.Answer{}, probe.Refused
		}
		slices.Sort(pods)
		c.mu.Lock()
		n := c.answers[dst.Addr]
		c.answers[dst.Addr]++
		choose := c.Choose
		c.mu.Unlock()
		pod := pods[n%len(pods)]
		if choose != nil {
			pod = choose(pods, n)
		}
		return echo.Answer{Pod: pod, Protocol: dst.Protocol}, probe.OK
	}
	for _, h := range c.Hosts(lab.KindPod) {
		if h.IP == dst.Addr.Addr() {
			return echo.Answer{Pod: h.Name, Protocol: dst.Protocol}, probe.OK
		}
	}
	return echo.Answer{}, probe.Timeout
}

// prober answers from the cluster's objects (Cluster.answer).
type prober struct {
	c    *Cluster
	from lab.Host
}

// Request answers as the objects say; the pod sees the sender's own address.
func (p prober) Request(_ context.Context, dst probe.Destination, opts probe.Options) probe.Result {
	a, class := p.c.answer(dst)
	res := probe.Result{Class: class, Total: time.Millisecond}
	if class != probe.OK {
		res.Err = fmt.Errorf("fake: %s to %s", class, dst.Addr)
		return res
	}
	a.Client = netip.AddrPortFrom(p.from.IP, opts.SourcePort)
	res.Answer = a
	return res
}

// Connect is Request, its time the connect's.
func (p prober) Connect(ctx context.Context, dst probe.Destination, opts probe.Options) probe.Result {
	res := p.Request(ctx, dst, opts)
	res.Connect = res.Total
	return res
}

// Dial is not available: the fake keeps no connection.
func (p prober) Dial(context.Context, probe.Destination, probe.Options) (cluster.Conn, error) {
	return nil, fmt.Errorf("fake: kept connection: %w", cluster.ErrNotAvailable)
}

// DialContext is not available: the fake has no sockets.
func (p prober) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, fmt.Errorf("fake: connection: %w", cluster.ErrNotAvailable)
}

// Close does nothing.
func (p prober) Close() error { return nil }

// WaitSynced makes every proxy that has not seen the latest change record a sync of it.
func (c *Cluster) WaitSynced(context.Context) error {
	rv := c.ResourceVersion()
	for _, px := range c.proxies {
		px.syncTo(rv, false)
	}
	return nil
}

// Proxies returns the nodes' proxies.
func (c *Cluster) Proxies() []cluster.Proxy {
	out := make([]cluster.Proxy, len(c.proxies))
	for i, px := range c.proxies {
		out[i] = px
	}
	return out
}

// WriteNodeState writes a line per proxy: its node and syncs.
func (c *Cluster) WriteNodeState(_ context.Context, w io.Writer) error {
	for _, px := range c.proxies {
		if _, err := fmt.Fprintf(w, "%s: %d syncs\n", px.node, len(px.Records())); err != nil {
			return fmt.Errorf("fake: node state: %w", err)
		}
	}
	return nil
}

// KernelRules is not available: the fake has no kernel.
func (c *Cluster) KernelRules(context.Context) (int, error) {
	return 0, fmt.Errorf("fake: kernel rules: %w", cluster.ErrNotAvailable)
}

// Info names the fake (server version "fake") and its node count.
func (c *Cluster) Info(context.Context) *cluster.Info {
	return &cluster.Info{ServerVersion: "fake", Nodes: len(c.proxies)}
}

// Proxy is a node's fake proxy: it records syncs and programs nothing.
type Proxy struct {
	node string
	mu   sync.Mutex
	recs []agent.SyncRecord
}

// syncTo records a sync carrying rv, unless one did (or full).
func (p *Proxy) syncTo(rv uint64, full bool) agent.SyncRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.recs); n > 0 && !full && p.recs[n-1].ResourceVersion >= rv {
		return p.recs[n-1]
	}
	now := time.Now()
	r := agent.SyncRecord{Start: now, End: now.Add(time.Millisecond), ResourceVersion: rv, Result: backends.SyncResult{Full: full || len(p.recs) == 0}}
	p.recs = append(p.recs, r)
	return r
}

// Node names the proxy's node.
func (p *Proxy) Node() string { return p.node }

// ForceSync records a sync of what the last one carried.
func (p *Proxy) ForceSync(_ context.Context, full bool) (agent.SyncRecord, error) {
	p.mu.Lock()
	var rv uint64
	if n := len(p.recs); n > 0 {
		rv = p.recs[n-1].ResourceVersion
	}
	p.mu.Unlock()
	return p.syncTo(rv, full), nil
}

// Records returns every sync so far.
func (p *Proxy) Records() []agent.SyncRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.recs)
}

// Metrics are empty: the fake measures nothing.
func (p *Proxy) Metrics() agent.Metrics { return agent.Metrics{} }

// Backend is nil: no backend programs a fake node.
func (p *Proxy) Backend() backends.Backend { return nil }
