//go:build linux

package testbed

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/apistore"
	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/kubestack/controlplane"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
)

// What callers read and change of a running testbed: the control plane's objects, the
// lab's hosts and probers, and the node agents. Each method says what it stands for.

// Delete removes one object (kind: Service, EndpointSlice, Pod, Deployment) from the
// control plane, as `kubectl delete KIND -n NAMESPACE NAME` would.
func (tb *Testbed) Delete(ctx context.Context, kind, namespace, name string) error {
	return tb.cluster.Delete(ctx, apistore.Kind(kind), namespace, name)
}

// Get returns one object of the control plane (a copy).
func (tb *Testbed) Get(kind, namespace, name string) (runtime.Object, error) {
	return tb.cluster.Get(apistore.Kind(kind), namespace, name)
}

// Services returns every Service of the control plane.
func (tb *Testbed) Services() []*corev1.Service { return tb.cluster.Services() }

// EndpointSlices returns every EndpointSlice of the control plane.
func (tb *Testbed) EndpointSlices() []*discoveryv1.EndpointSlice {
	return tb.cluster.EndpointSlices()
}

// Pods returns every Pod of the control plane (with the status the kubelet reported).
func (tb *Testbed) Pods() []*corev1.Pod { return tb.cluster.Pods() }

// ScaleDeployment sets a Deployment's replica count, as `kubectl scale` would.
func (tb *Testbed) ScaleDeployment(_ context.Context, namespace, name string, replicas int32) error {
	return tb.cluster.ScaleDeployment(namespace, name, replicas)
}

// ResourceVersion is the control plane's current resource version: it grows with every
// change.
func (tb *Testbed) ResourceVersion() uint64 { return tb.cluster.ResourceVersion() }

// Host returns a lab host by name: node-N, client-N, probe-node-N or a pod's host name
// (HostName).
func (tb *Testbed) Host(name string) (lab.Host, bool) { return tb.lab.Host(name) }

// Hosts returns the lab's hosts of one kind, in name order.
func (tb *Testbed) Hosts(kind lab.HostKind) []lab.Host { return tb.lab.Hosts(kind) }

// PodHost returns the lab host of a cluster pod.
func (tb *Testbed) PodHost(namespace, name string) (lab.Host, bool) {
	return tb.lab.Host(HostName(namespace, name))
}

// AddPod adds a plain lab pod (an echo server outside the control plane, e.g. an
// endpoint of generated EndpointSlices) on a node.
func (tb *Testbed) AddPod(ctx context.Context, name, node string) (lab.Host, error) {
	h, err := tb.lab.AddPod(ctx, lab.PodSpec{Name: name, Node: node})
	if err != nil {
		return lab.Host{}, err
	}
	return *h, nil
}

// AddClientRoute routes prefix from every external client to node 0 (a load-balancer or
// external IP), as a router in front of the cluster would.
func (tb *Testbed) AddClientRoute(ctx context.Context, prefix netip.Prefix) error {
	return tb.lab.AddClientRoute(ctx, prefix)
}

// Prober returns the shared prober of a lab host (owned by the lab: do not close it).
func (tb *Testbed) Prober(host string) (cluster.Prober, error) {
	pr, err := tb.lab.Prober(host)
	if err != nil {
		return nil, err
	}
	return labProber{pr}, nil
}

// NewProber returns a prober of its own in a host's namespace with the given number of
// workers; the caller closes it.
func (tb *Testbed) NewProber(host string, workers int) (cluster.ProberCloser, error) {
	h, ok := tb.lab.Host(host)
	if !ok {
		return nil, fmt.Errorf("no host %q in the lab", host)
	}
	pr, err := probe.New(h.NetNSPath, probe.WithWorkers(workers))
	if err != nil {
		return nil, err
	}
	return labProber{pr}, nil
}

// labProber is a lab prober as a cluster.Prober: its Dial's *probe.Conn as a
// cluster.Conn.
type labProber struct{ *probe.Prober }

// Dial opens a kept connection.
func (p labProber) Dial(ctx context.Context, dst probe.Destination, opts probe.Options) (cluster.Conn, error) {
	conn, err := p.Prober.Dial(ctx, dst, opts)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return conn, nil
}

// Agents returns the node agents (one per node, in node order).
func (tb *Testbed) Agents() []*agent.Agent { return tb.agents }

// Agent returns the agent of a node.
func (tb *Testbed) Agent(node string) (*agent.Agent, bool) {
	for _, ag := range tb.agents {
		if ag.Node() == node {
			return ag, true
		}
	}
	return nil, false
}

// ControlPlane returns the lab's real etcd and kube-apiserver, or nil when the testbed
// started none (Options.ControlPlane, or a backend that needs one).
func (tb *Testbed) ControlPlane() *controlplane.ControlPlane { return tb.cp }
