//go:build linux

// Package testbed runs a whole fake cluster: a lab (namespaces and echo servers), its
// control plane (object store, allocators, endpoints controller), a kubelet that turns
// scheduled Pods into lab pods, and one proxy agent per node driving a backend. Scenarios
// and `kpbench check` drive it; probes go through its lab.
package testbed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/apistore"
	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/internal/chans"
	"kpbench.dev/kpbench/kubestack/controlplane"
	"kpbench.dev/kpbench/lab"
)

// Options describe a testbed.
type Options struct {
	// Lab is the lab's topology. PodsPerNode pods are plain lab pods outside the cluster
	// (probe sources); cluster pods come from manifests.
	Lab lab.Config
	// Backend names the proxy backend every node runs (see backends/all).
	Backend string
	// Settings are backend settings (masquerade bit, IPVS scheduler).
	Settings all.Settings
	// View: cluster CIDR (default: the lab's pod CIDR), masqueradeAll and the ServiceCIDRs
	// (default: ServiceCIDR, or the cluster's default range).
	View backends.ViewOptions
	// MinSyncPeriod and SyncPeriod of every agent (defaults 0 and 30s: the bench syncs as
	// soon as changes arrive unless a scenario asks for kube-proxy's 1s).
	MinSyncPeriod, SyncPeriod time.Duration
	// ServiceCIDR, LoadBalancerPool and the node port range of the control plane
	// (cluster's defaults when zero).
	ServiceCIDR, LoadBalancerPool netip.Prefix
	NodePortMin, NodePortMax      int32
	// ProbePods adds one lab pod per node, named probe-<node>, as a source of in-cluster
	// traffic that belongs to no Service.
	ProbePods bool
	// ControlPlane starts a real etcd and kube-apiserver in the lab (kubestack/controlplane) and
	// publishes the store to it. Backends that read a real API server (upstream
	// kube-proxy, all.NeedsAPIServer) get one whatever this says.
	ControlPlane bool
}

// Testbed is a running fake cluster. It is used through its methods: objects (Apply,
// Delete, Get, Services, ...), hosts and probes (Host, Hosts, AddPod, Prober, ...), and
// the proxies (Agents, WaitSynced).
type Testbed struct {
	opts    Options
	lab     *lab.Lab
	cluster *apistore.Store
	agents  []*agent.Agent
	cp      *controlplane.ControlPlane // nil unless started (Options.ControlPlane)

	stateDir  string
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	kubelet   *kubelet
	publisher *controlplane.Publisher
}

// Start builds the lab, the control plane and the agents, and waits for the first sync
// of every node. On error everything made so far is removed.
func Start(ctx context.Context, o Options) (_ *Testbed, err error) {
	if o.Backend == "" {
		o.Backend = "iptables"
	}
	if !all.Valid(o.Backend) {
		_, err := all.New(o.Backend, all.Node{}, o.Settings)
		return nil, err
	}
	o.Lab.Default()
	if !o.View.ClusterCIDR.IsValid() {
		o.View.ClusterCIDR = o.Lab.PodCIDR
	}
	if len(o.View.ServiceCIDRs) == 0 {
		cidr := o.ServiceCIDR
		if !cidr.IsValid() {
			cidr = apistore.DefaultServiceCIDR
		}
		o.View.ServiceCIDRs = []netip.Prefix{cidr}
	}
	if !o.LoadBalancerPool.IsValid() {
		o.LoadBalancerPool = apistore.DefaultLoadBalancerPool
	}
	o.Lab.ClientRoutes = append(o.Lab.ClientRoutes, o.LoadBalancerPool)
	podsPerNode := o.Lab.PodsPerNode
	o.Lab.PodCapacity = max(o.Lab.PodCapacity, podsPerNode+1) // and the probe pod
	o.Lab.PodsPerNode = 0
	l, err := lab.Up(ctx, o.Lab)
	if err != nil {
		return nil, err
	}
	tb := &Testbed{opts: o, lab: l}
	defer func() {
		if err != nil {
			err = errors.Join(err, tb.Stop(context.WithoutCancel(ctx)))
		}
	}()
	var nodes []apistore.Node
	for _, n := range l.Hosts(lab.KindNode) {
		nodes = append(nodes, apistore.Node{Name: n.Name, IP: n.IP, Zone: n.Zone})
		for k := range podsPerNode {
			if _, err := l.AddPod(ctx, lab.PodSpec{Name: fmt.Sprintf("%s-pod-%d", n.Name, k), Node: n.Name}); err != nil {
				return tb, err
			}
		}
		if o.ProbePods {
			if _, err := l.AddPod(ctx, lab.PodSpec{Name: ProbePod(n.Name), Node: n.Name}); err != nil {
				return tb, err
			}
		}
	}
	tb.cluster, err = apistore.New(apistore.Config{
		ServiceCIDR: o.ServiceCIDR, LoadBalancerPool: o.LoadBalancerPool,
		NodePortMin: o.NodePortMin, NodePortMax: o.NodePortMax, Nodes: nodes,
	})
	if err != nil {
		return tb, fmt.Errorf("control plane: %w", err)
	}
	tb.stateDir = l.StateDir()
	if err := os.MkdirAll(tb.stateDir, 0o755); err != nil {
		return tb, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tb.cancel = cancel
	tb.kubelet = newKubelet(l, tb.cluster)
	events, err := tb.cluster.Watch(runCtx)
	if err != nil {
		return tb, err
	}
	tb.wg.Add(1)
	go func() { defer tb.wg.Done(); tb.kubelet.run(runCtx, events) }()

	upstreamProxy := all.NeedsAPIServer(o.Backend)
	settings, minSync, syncPeriod := o.Settings, o.MinSyncPeriod, o.SyncPeriod
	if upstreamProxy {
		// kube-proxy runs its own loop with the scenario's periods; the agent only waits
		// for it, as soon as changes arrive, and never forces a full sync (a restart).
		settings.MinSyncPeriod, settings.SyncPeriod = o.MinSyncPeriod, o.SyncPeriod
		settings.ClusterCIDR, settings.MasqueradeAll = o.View.ClusterCIDR, o.View.MasqueradeAll
		minSync, syncPeriod = 0, 24*time.Hour
	}
	if o.ControlPlane || upstreamProxy {
		if err := tb.startControlPlane(ctx); err != nil {
			return tb, err
		}
	}
	for _, n := range l.Hosts(lab.KindNode) {
		node := all.Node{Name: n.Name, NetNSPath: n.NetNSPath, StateDir: tb.stateDir, IP: n.IP}
		if tb.cp != nil {
			if node.Kubeconfig, err = tb.cp.KubeconfigFor(n.Name); err != nil {
				return tb, err
			}
			node.WaitPublished = func(ctx context.Context) error {
				return tb.publisher.WaitPublished(ctx, tb.cluster.ResourceVersion())
			}
		}
		be, err := all.New(o.Backend, node, settings)
		if err != nil {
			return tb, fmt.Errorf("node %s: %w", n.Name, err)
		}
		ag := agent.New(agent.Config{
			Node:    backends.NodeView{Name: n.Name, IPs: []netip.Addr{n.IP}, Zone: n.Zone},
			View:    o.View,
			Backend: be, MinSyncPeriod: minSync, SyncPeriod: syncPeriod,
		})
		tb.agents = append(tb.agents, ag)
		// kube-proxy's health servers (proxier /healthz on 10256, a health-check node port
		// per LoadBalancer Service with externalTrafficPolicy Local), in the node's
		// namespace; upstream kube-proxy serves its own.
		if !upstreamProxy {
			if err := ag.ServeHealth(ctx, agent.NetNSListen(n.NetNSPath), 0); err != nil {
				return tb, err
			}
		}
		ch, err := tb.cluster.Watch(runCtx)
		if err != nil {
			return tb, err
		}
		tb.wg.Add(2)
		go func() { defer tb.wg.Done(); feed(runCtx, ag, ch) }()
		go func() { defer tb.wg.Done(); _ = ag.Run(runCtx) }()
	}
	return tb, tb.WaitSynced(ctx)
}

// startControlPlane starts etcd and kube-apiserver in the lab and the publisher that
// mirrors the store into them, and waits until the store as it is now is published.
func (tb *Testbed) startControlPlane(ctx context.Context) error {
	o := tb.opts
	cp, err := controlplane.Start(ctx, tb.lab, controlplane.Options{
		ServiceCIDR: o.ServiceCIDR, NodePortMin: o.NodePortMin, NodePortMax: o.NodePortMax,
	})
	if err != nil {
		return err
	}
	tb.cp = cp
	if tb.publisher, err = controlplane.Publish(ctx, cp, tb.cluster); err != nil {
		return err
	}
	return tb.publisher.WaitPublished(ctx, tb.cluster.ResourceVersion())
}

// ProbePod is the name of the probe pod of a node.
func ProbePod(node string) string { return "probe-" + node }

// feed turns the control plane's events into agent changes.
func feed(ctx context.Context, ag *agent.Agent, ch <-chan apistore.Event) {
	for ev := range chans.Each(ctx, ch) {
		c := agent.Change{Deleted: ev.Type == apistore.Deleted, ResourceVersion: ev.ResourceVersion}
		switch o := ev.Object.(type) {
		case *corev1.Service:
			c.Service = o
		case *discoveryv1.EndpointSlice:
			c.Slice = o
		}
		ag.Observe(c)
	}
}

// Apply creates or updates objects in the control plane (all or nothing). Call
// WaitSynced to wait for pods to run and rules to be programmed.
func (tb *Testbed) Apply(ctx context.Context, objs ...runtime.Object) error {
	return tb.cluster.Apply(ctx, objs...)
}

// WaitSynced waits until the kubelet has started every scheduled pod and every node has
// programmed every change made so far.
func (tb *Testbed) WaitSynced(ctx context.Context) error {
	var rv uint64
	for {
		rv = tb.cluster.ResourceVersion()
		if err := tb.kubelet.waitProcessed(ctx, rv); err != nil {
			return err
		}
		if tb.cluster.ResourceVersion() == rv {
			break // the kubelet's own status updates are in, nothing new happened
		}
	}
	for _, ag := range tb.agents {
		if err := ag.WaitSynced(ctx, rv); err != nil {
			return err
		}
	}
	return nil
}

// SetPodReady changes a pod's readiness (and termination) as its kubelet would report it.
func (tb *Testbed) SetPodReady(namespace, name string, ready, terminating bool) error {
	return tb.kubelet.setConditions(namespace, name, ready, terminating)
}

// Stop stops the agents and the kubelet and removes the lab (and with it every rule).
func (tb *Testbed) Stop(ctx context.Context) error {
	if tb.cancel != nil {
		tb.cancel()
	}
	tb.wg.Wait()
	var errs []error
	for _, ag := range tb.agents {
		errs = append(errs, ag.CloseHealth())
	}
	// Upstream kube-proxy first, then the publisher, then the API server and etcd (the
	// other order makes the API server hang).
	for _, ag := range tb.agents {
		errs = append(errs, all.Close(ctx, ag.Backend()))
	}
	if tb.publisher != nil {
		tb.publisher.Stop()
	}
	if tb.cp != nil {
		errs = append(errs, tb.cp.Stop(ctx))
	}
	if tb.lab != nil {
		errs = append(errs, tb.lab.Down(ctx))
	}
	if tb.stateDir != "" {
		errs = append(errs, os.RemoveAll(tb.stateDir))
	}
	return errors.Join(errs...)
}

// Backend returns the backend's name.
func (tb *Testbed) Backend() string { return tb.opts.Backend }

// Settings returns the backend settings every node's backend was built with.
func (tb *Testbed) Settings() all.Settings { return tb.opts.Settings }
