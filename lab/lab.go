//go:build linux

// Package lab builds the test bench's fake cluster out of Linux network namespaces: nodes,
// pods and external clients joined by veth pairs and bridges, with an echo server in every
// pod, all hosted by the one kpbench process.
//
// Picture (defaults):
//
//	client-0 (172.18.0.200) ─┐
//	                         ├─ kpbfab0 bridge (fabric namespace) ─┬─ node-0 eth0 172.18.0.10
//	                         │                                     └─ node-1 eth0 172.18.0.11
//	node-i: eth0 on the fabric, kpbbr0 bridge 10.244.i.1/24, ip_forward, routes to the other
//	        nodes' pod blocks; pods: eth0 10.244.i.k, default route via 10.244.i.1.
//
// Every namespace is named kpb-<lab>-<host>; every link we name starts with kpb (eth0 and
// lo excepted). The lab registers itself in /run/kpbench/labs before creating anything, so
// that `kpbench lab down --all` can sweep what a crashed run left behind.
package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// Host is one namespace of the lab.
type Host struct {
	// Name is how users and scenarios refer to the host ("node-0", "client-0", a pod name).
	Name string
	// Kind is node, pod or client.
	Kind HostKind
	// NetNS is the namespace name; NetNSPath its bind mount.
	NetNS, NetNSPath string
	// IP is the host's address (fabric address for nodes and clients, pod IP for pods).
	IP netip.Addr
	// Node is the node of a pod.
	Node string
	// Zone of a node (empty when zones are not configured).
	Zone string
	// PodCIDR is a node's pod block.
	PodCIDR netip.Prefix
	// Ports a pod's echo server listens on.
	Ports []Port
	// Ready and Terminating are a pod's conditions (see SetPodConditions).
	Ready, Terminating bool
	// Labels of a pod, as the cluster gave them (informational).
	Labels map[string]string

	index int // node or client index; pod sequence number
	echo  *echo.Server
}

// PodSpec asks for a pod.
type PodSpec struct {
	// Name must be unique among the lab's hosts.
	Name string
	// Node the pod runs on.
	Node string
	// Ports the echo server listens on (none: the config's DefaultPodPorts).
	Ports []Port
	// Labels are recorded for status output.
	Labels map[string]string
	// NoEcho leaves the pod without the lab's echo server, and not Ready: its creator
	// serves the pod's ports itself and reports its conditions (the lab kubelet, one echo
	// server per container). Ports are then only recorded, for `lab status`.
	NoEcho bool
}

// Lab is a running lab. Its methods are safe for concurrent use.
type Lab struct {
	cfg      Config
	registry Registry
	created  time.Time

	mu      sync.Mutex
	hosts   map[string]*Host
	nodes   []*Host
	clients []*Host
	fabric  *Host
	podSeq  int
	usedIPs map[netip.Addr]bool
	probers map[string]*probe.Prober
	warn    []string
	down    bool
}

// Option changes how Up builds a lab.
type Option func(*options)

type options struct {
	registryDir string
}

// podParallelism is how many pods Up creates at once.
const podParallelism = 8

// WithRegistryDir records the lab in dir instead of DefaultRegistryDir (tests).
func WithRegistryDir(dir string) Option { return func(o *options) { o.registryDir = dir } }

// Up builds the lab described by cfg. On error (or cancellation) everything created so far
// is removed again before Up returns.
func Up(ctx context.Context, cfg Config, opts ...Option) (*Lab, error) {
	o := options{registryDir: DefaultRegistryDir}
	for _, opt := range opts {
		opt(&o)
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckMachine(cfg); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("lab up: needs root (network namespaces)")
	}
	reg := Registry{Dir: o.registryDir}
	if old, err := reg.Read(cfg.Name); err == nil {
		if old.OwnerAlive() {
			return nil, fmt.Errorf("lab %q already exists (owner pid %d is running); choose another --name or run `kpbench lab down --name %s`", cfg.Name, old.PID, cfg.Name)
		}
		if err := sweepLab(reg, old.Name); err != nil {
			return nil, fmt.Errorf("lab %q: removing stale leftovers: %w", cfg.Name, err)
		}
	}
	l := &Lab{
		cfg: cfg, registry: reg, created: time.Now(),
		hosts: map[string]*Host{}, usedIPs: map[netip.Addr]bool{}, probers: map[string]*probe.Prober{},
	}
	if err := l.build(ctx); err != nil {
		derr := l.Down(context.WithoutCancel(ctx))
		return nil, errors.Join(fmt.Errorf("lab %s up: %w", cfg.Name, err), derr)
	}
	return l, nil
}

func (l *Lab) nsName(host string) string {
	return fmt.Sprintf("%s-%s-%s", netns.Prefix, l.cfg.Name, host)
}

func (l *Lab) build(ctx context.Context) error {
	if err := l.saveRecord(StateBuilding); err != nil { // before any namespace exists
		return err
	}
	fabric, err := l.newHost("fabric", KindFabric)
	if err != nil {
		return err
	}
	l.fabric = fabric
	fh, err := openNS(fabric.NetNSPath)
	if err != nil {
		return err
	}
	defer fh.Close()
	// The fabric's own address is the nodes' default gateway: a dead end (the fabric does
	// not forward), but a route, so that traffic to a service IP with no endpoints reaches
	// the node's filter rules (REJECT) instead of failing route lookup, as on a real node.
	if err := fh.addBridge(fabricBridge, netip.PrefixFrom(l.cfg.FabricGateway(), l.cfg.NodeCIDR.Bits())); err != nil {
		return fmt.Errorf("fabric: %w", err)
	}
	for i := range l.cfg.Nodes {
		if err := l.addNode(fh, i); err != nil {
			return err
		}
	}
	for j := range l.cfg.Clients {
		if err := l.addClient(fh, j); err != nil {
			return err
		}
	}
	if err := l.saveRecord(StateBuilding); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(podParallelism)
	for _, node := range l.nodes {
		for k := range l.cfg.PodsPerNode {
			spec := PodSpec{Name: fmt.Sprintf("%s-pod-%d", node.Name, k), Node: node.Name}
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				_, err := l.addPod(spec, false)
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Links come up together (the kernel's link watcher runs about once a second), so one
	// wait at the end costs what a wait per pod would cost once.
	for _, h := range l.Hosts(KindPod) {
		if err := waitOperUp(ctx, h.NetNSPath, hostIfName); err != nil {
			return fmt.Errorf("pod %s: %w", h.Name, err)
		}
	}
	for _, h := range append(l.Hosts(KindNode), l.Hosts(KindClient)...) {
		if err := waitOperUp(ctx, h.NetNSPath, hostIfName); err != nil {
			return fmt.Errorf("%s %s: %w", h.Kind, h.Name, err)
		}
	}
	return l.saveRecord(StateReady)
}

// newHost creates the namespace of a host and registers it.
func (l *Lab) newHost(name string, kind HostKind) (*Host, error) {
	h := &Host{Name: name, Kind: kind, NetNS: l.nsName(name)}
	l.mu.Lock()
	if _, dup := l.hosts[name]; dup {
		l.mu.Unlock()
		return nil, fmt.Errorf("host %q already exists in lab %s", name, l.cfg.Name)
	}
	if kind == KindPod {
		h.index = l.podSeq
		l.podSeq++
		h.NetNS = l.nsName(fmt.Sprintf("p%d", h.index))
	}
	l.hosts[name] = h // reserved before creation, so a failed Up still sweeps it
	l.mu.Unlock()
	path, err := netns.Create(h.NetNS)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	h.NetNSPath = path
	return h, nil
}

func (l *Lab) addNode(fh *nsHandle, i int) error {
	name := NodeName(i)
	h, err := l.newHost(name, KindNode)
	if err != nil {
		return err
	}
	h.index, h.IP, h.PodCIDR = i, l.cfg.NodeIP(i), l.cfg.NodePodCIDR(i)
	if len(l.cfg.Zones) > 0 {
		h.Zone = l.cfg.Zones[i%len(l.cfg.Zones)]
	}
	nh, err := l.joinFabric(fh, h, fmt.Sprintf("kpbn%d", i), l.cfg.FabricGateway())
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	defer nh.Close()
	gw := h.PodCIDR.Addr().Next()
	if err := nh.addBridge(podBridge, netip.PrefixFrom(gw, h.PodCIDR.Bits())); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	for j := range l.cfg.Nodes {
		if j != i {
			if err := nh.addRoute(l.cfg.NodePodCIDR(j), l.cfg.NodeIP(j)); err != nil {
				return fmt.Errorf("node %s: %w", name, err)
			}
		}
	}
	if err := setSysctls(h.NetNSPath, nodeSysctls); err != nil {
		if !errors.Is(err, ErrNoBrNetfilter) {
			return fmt.Errorf("node %s: %w", name, err)
		}
		l.mu.Lock()
		l.warn = append(l.warn, fmt.Sprintf("node %s: %v", name, err))
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.nodes = append(l.nodes, h)
	l.mu.Unlock()
	return nil
}

// joinFabric plugs host h into the fabric: a veth named link, its fabric end on the fabric
// bridge, its other end h's eth0 with h.IP on the node subnet and a default route via gw
// (none when gw is not valid). It returns h's namespace handle, open: the caller closes it.
func (l *Lab) joinFabric(fh *nsHandle, h *Host, link string, gw netip.Addr) (*nsHandle, error) {
	hh, err := openNS(h.NetNSPath)
	if err != nil {
		return nil, err
	}
	if err := fh.addVethInto(link, fabricBridge, hh, false); err != nil {
		hh.Close()
		return nil, err
	}
	if err := hh.setupHostIf(netip.PrefixFrom(h.IP, l.cfg.NodeCIDR.Bits()), gw); err != nil {
		hh.Close()
		return nil, err
	}
	return hh, nil
}

func (l *Lab) addClient(fh *nsHandle, j int) error {
	name := ClientName(j)
	h, err := l.newHost(name, KindClient)
	if err != nil {
		return err
	}
	h.index, h.IP = j, l.cfg.ClientIP(j)
	ch, err := l.joinFabric(fh, h, fmt.Sprintf("kpbc%d", j), netip.Addr{})
	if err != nil {
		return fmt.Errorf("client %s: %w", name, err)
	}
	defer ch.Close()
	for _, p := range l.cfg.ClientRoutes {
		if err := ch.addRoute(p, l.cfg.NodeIP(0)); err != nil {
			return fmt.Errorf("client %s: %w", name, err)
		}
	}
	l.mu.Lock()
	l.clients = append(l.clients, h)
	l.mu.Unlock()
	return nil
}

// AddClientRoute routes prefix from every client to node 0 (for load-balancer IPs and
// externalIPs, which clients reach through the cluster's front door). Adding a route that
// exists already is not an error.
//
// Equivalent to: `ip route replace $prefix via $node0` on every client.
func (l *Lab) AddClientRoute(ctx context.Context, prefix netip.Prefix) error {
	for _, c := range l.Hosts(KindClient) {
		if err := ctx.Err(); err != nil {
			return err
		}
		ch, err := openNS(c.NetNSPath)
		if err != nil {
			return err
		}
		err = ch.RouteReplace(&netlink.Route{Dst: toIPNet(prefix.Masked()), Gw: net.IP(l.cfg.NodeIP(0).AsSlice())})
		ch.Close()
		if err != nil {
			return fmt.Errorf("client %s: route %s: %w", c.Name, prefix, err)
		}
	}
	return nil
}

// AddPod creates a pod on a node: its namespace, its veth on the node's bridge (hairpin on),
// its address and default route, and its echo server, and returns once its link carries
// traffic (a fresh veth drops packets until the kernel's link watcher marks it up, up to a
// second later). The pod starts Ready, unless spec.NoEcho.
func (l *Lab) AddPod(ctx context.Context, spec PodSpec) (*Host, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := l.addPod(spec, true)
	if err != nil {
		return nil, err
	}
	if err := waitOperUp(ctx, h.NetNSPath, hostIfName); err != nil {
		return nil, fmt.Errorf("pod %s: %w", spec.Name, err)
	}
	return h, nil
}

func (l *Lab) addPod(spec PodSpec, record bool) (*Host, error) {
	l.mu.Lock()
	if l.down {
		l.mu.Unlock()
		return nil, fmt.Errorf("lab %s is down", l.cfg.Name)
	}
	node, ok := l.hosts[spec.Node]
	if !ok || node.Kind != KindNode {
		l.mu.Unlock()
		return nil, fmt.Errorf("pod %s: no node %q in lab %s", spec.Name, spec.Node, l.cfg.Name)
	}
	if len(l.hosts)-len(l.nodes)-len(l.clients)-1 >= MaxPods {
		l.mu.Unlock()
		return nil, fmt.Errorf("pod %s: lab %s already has the maximum of %d pods", spec.Name, l.cfg.Name, MaxPods)
	}
	ip, err := l.allocPodIP(node)
	l.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", spec.Name, err)
	}
	h, err := l.newHost(spec.Name, KindPod)
	if err != nil {
		l.releaseIP(ip)
		return nil, err
	}
	h.Node, h.IP, h.Labels = node.Name, ip, spec.Labels
	h.Ports = spec.Ports
	if len(h.Ports) == 0 && !spec.NoEcho {
		h.Ports = l.cfg.DefaultPodPorts
	}
	if err := l.wirePod(node, h); err != nil {
		return nil, fmt.Errorf("pod %s: %w", spec.Name, err)
	}
	if !spec.NoEcho {
		srv, err := echo.Serve(h.NetNSPath, echo.Identity{Pod: h.Name, PodIP: ip.String(), Node: node.Name}, h.Ports)
		if err != nil {
			return nil, fmt.Errorf("pod %s: echo server: %w", spec.Name, err)
		}
		l.mu.Lock()
		h.echo, h.Ready = srv, true
		l.mu.Unlock()
	}
	if record {
		if err := l.saveRecord(""); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (l *Lab) wirePod(node, pod *Host) error {
	nh, err := openNS(node.NetNSPath)
	if err != nil {
		return err
	}
	defer nh.Close()
	ph, err := openNS(pod.NetNSPath)
	if err != nil {
		return err
	}
	defer ph.Close()
	if err := nh.addVethInto(fmt.Sprintf("kpbp%d", pod.index), podBridge, ph, true); err != nil {
		return err
	}
	return ph.setupHostIf(netip.PrefixFrom(pod.IP, node.PodCIDR.Bits()), node.PodCIDR.Addr().Next())
}

// allocPodIP returns the lowest free address of the node's block after the gateway.
// Callers hold l.mu.
func (l *Lab) allocPodIP(node *Host) (netip.Addr, error) {
	block := node.PodCIDR
	last := addrAdd(block.Addr(), uint32(1)<<(32-block.Bits())-1) // broadcast
	for a := block.Addr().Next().Next(); a.Less(last); a = a.Next() {
		if !l.usedIPs[a] {
			l.usedIPs[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node %s: pod block %s is full", node.Name, block)
}

func (l *Lab) releaseIP(a netip.Addr) {
	l.mu.Lock()
	delete(l.usedIPs, a)
	l.mu.Unlock()
}

// RemovePod stops a pod's echo server and deletes its namespace (with its veth pair).
func (l *Lab) RemovePod(ctx context.Context, name string) error {
	l.mu.Lock()
	h, ok := l.hosts[name]
	if !ok || h.Kind != KindPod {
		l.mu.Unlock()
		return fmt.Errorf("lab %s: no pod %q", l.cfg.Name, name)
	}
	delete(l.hosts, name)
	delete(l.usedIPs, h.IP)
	pr := l.probers[name]
	delete(l.probers, name)
	l.mu.Unlock()
	err := l.destroyHost(h, pr)
	return errors.Join(err, l.saveRecord(""))
}

func (l *Lab) destroyHost(h *Host, pr *probe.Prober) error {
	if pr != nil {
		pr.Close()
	}
	if h.echo != nil {
		h.echo.Close()
	}
	return netns.Delete(h.NetNS)
}

// SetPodConditions records a pod's readiness and termination, as the kubelet reports them.
func (l *Lab) SetPodConditions(name string, ready, terminating bool) error {
	l.mu.Lock()
	h, ok := l.hosts[name]
	if !ok || h.Kind != KindPod {
		l.mu.Unlock()
		return fmt.Errorf("lab %s: no pod %q", l.cfg.Name, name)
	}
	h.Ready, h.Terminating = ready, terminating
	l.mu.Unlock()
	return l.saveRecord("")
}

// Host returns a copy of the named host.
func (l *Lab) Host(name string) (Host, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.hosts[name]
	if !ok {
		return Host{}, false
	}
	return *h, true
}

// Hosts returns copies of every host of a kind, in creation order.
func (l *Lab) Hosts(kind HostKind) []Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Host
	for _, h := range l.hosts {
		if h.Kind == kind {
			out = append(out, *h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out
}

// Name returns the lab's name.
func (l *Lab) Name() string { return l.cfg.Name }

// StateDir is the lab's directory for the files of its users (see Registry.StateDir); it
// is not created here, and is removed with the lab.
func (l *Lab) StateDir() string { return l.registry.StateDir(l.cfg.Name) }

// Config returns the lab's configuration, defaults applied.
func (l *Lab) Config() Config { return l.cfg }

// Warnings returns what the lab could not set up as it wanted, without failing.
func (l *Lab) Warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.warn)
}

// Prober returns the (shared, cached) prober of a host; probes are sent from inside the
// host's namespace.
func (l *Lab) Prober(host string) (*probe.Prober, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pr, ok := l.probers[host]; ok {
		return pr, nil
	}
	h, ok := l.hosts[host]
	if !ok || h.Kind == KindFabric {
		return nil, fmt.Errorf("lab %s: no host %q", l.cfg.Name, host)
	}
	pr, err := probe.New(h.NetNSPath)
	if err != nil {
		return nil, fmt.Errorf("prober on %s: %w", host, err)
	}
	l.probers[host] = pr
	return pr, nil
}

// Down stops every echo server and prober and deletes every namespace of the lab, then
// removes its registry record. It is safe to call more than once.
func (l *Lab) Down(ctx context.Context) error {
	l.mu.Lock()
	l.down = true
	hosts := make([]*Host, 0, len(l.hosts))
	for _, h := range l.hosts {
		hosts = append(hosts, h)
	}
	probers := l.probers
	l.probers = map[string]*probe.Prober{}
	l.mu.Unlock()
	if len(hosts) > 0 || len(probers) > 0 {
		_ = l.saveRecord(StateStopping)
	}
	for _, pr := range probers {
		pr.Close()
	}
	var errs []error
	for _, h := range hosts {
		if h.echo != nil {
			h.echo.Close()
		}
		if err := netns.Delete(h.NetNS); err != nil {
			errs = append(errs, err)
		}
	}
	// Anything with our prefix that a failure left unrecorded goes too.
	if err := sweepNamespaces(l.nsName("")); err != nil {
		errs = append(errs, err)
	}
	l.mu.Lock()
	l.hosts = map[string]*Host{}
	l.mu.Unlock()
	errs = append(errs, l.registry.Remove(l.cfg.Name))
	return errors.Join(errs...)
}

// Record returns the lab's registry record as `lab status` shows it.
func (l *Lab) Record(state string) *Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := &Record{Entry: Entry{Name: l.cfg.Name, PID: os.Getpid(), State: state, Created: l.created}}
	for _, h := range l.hosts {
		hr := HostRecord{Name: h.Name, Kind: h.Kind, NetNS: h.NetNS, Node: h.Node, Zone: h.Zone, Ready: h.Ready, Terminating: h.Terminating}
		if h.IP.IsValid() {
			hr.IP = h.IP.String()
		}
		if h.PodCIDR.IsValid() {
			hr.PodCIDR = h.PodCIDR.String()
		}
		for _, p := range h.Ports {
			hr.Ports = append(hr.Ports, fmt.Sprintf("%d/%s", p.Number, strings.ToLower(string(p.Protocol))))
		}
		rec.Hosts = append(rec.Hosts, hr)
	}
	kindOrder := map[HostKind]int{KindFabric: 0, KindNode: 1, KindClient: 2, KindPod: 3}
	sort.Slice(rec.Hosts, func(i, j int) bool {
		a, b := rec.Hosts[i], rec.Hosts[j]
		if a.Kind != b.Kind {
			return kindOrder[a.Kind] < kindOrder[b.Kind]
		}
		if a.Kind == KindPod {
			if a.Node != b.Node {
				return a.Node < b.Node
			}
			return a.Name < b.Name
		}
		return l.hosts[a.Name].index < l.hosts[b.Name].index
	})
	return rec
}

// saveRecord writes the registry record; state "" keeps the last one.
func (l *Lab) saveRecord(state string) error {
	if state == "" {
		state = StateReady
		if old, err := l.registry.Read(l.cfg.Name); err == nil {
			state = old.State
		}
	}
	return l.registry.Write(l.Record(state))
}
