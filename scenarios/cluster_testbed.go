//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"io"

	"kpbench.dev/kpbench/cluster/testbed"
	"kpbench.dev/kpbench/kubestack/controlplane"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/scenarios/measure"
)

// TestbedCluster is the lab's testbed as a session's Cluster: objects in its control
// plane, probes from its namespaces, its node agents as the proxies.
func TestbedCluster(tb *testbed.Testbed) Cluster { return testbedCluster{tb} }

// testbedCluster adapts *testbed.Testbed to Cluster.
type testbedCluster struct {
	*testbed.Testbed
}

// ScaleDeployment sets a Deployment's replicas in the testbed's control plane.
func (c testbedCluster) ScaleDeployment(_ context.Context, namespace, name string, replicas int32) error {
	return c.Testbed.ScaleDeployment(namespace, name, replicas)
}

// SetPodConditions sets a pod's conditions as its kubelet would report them, keeping
// the unset ones.
func (c testbedCluster) SetPodConditions(_ context.Context, namespace, name string, ready, terminating *bool) error {
	h, ok := c.PodHost(namespace, name)
	if !ok {
		return fmt.Errorf("no pod %s/%s in the lab", namespace, name)
	}
	r, t := h.Ready, h.Terminating
	if ready != nil {
		r = *ready
	}
	if terminating != nil {
		t = *terminating
	}
	return c.SetPodReady(namespace, name, r, t)
}

// ProbeHost names the node's probe pod.
func (c testbedCluster) ProbeHost(node string) string { return testbed.ProbePod(node) }

// AddPod adds a plain lab pod on node.
func (c testbedCluster) AddPod(ctx context.Context, name, node string) (lab.Host, error) {
	return c.Testbed.AddPod(ctx, lab.PodSpec{Name: name, Node: node})
}

// ClientFor is the client itself: the lab has clients outside the cluster.
func (c testbedCluster) ClientFor(client, _ string) (lab.Host, string, error) {
	h, ok := c.Host(client)
	if !ok {
		return lab.Host{}, "", fmt.Errorf("no host %q in the lab", client)
	}
	return h, "", nil
}

// Prober returns the host's shared prober.
func (c testbedCluster) Prober(host string) (Prober, error) {
	pr, err := c.Testbed.Prober(host)
	if err != nil {
		return nil, err
	}
	return labProber{pr}, nil
}

// NewProber returns a prober of the caller's own.
func (c testbedCluster) NewProber(host string, workers int) (ProberCloser, error) {
	pr, err := c.Testbed.NewProber(host, workers)
	if err != nil {
		return nil, err
	}
	return labProber{pr}, nil
}

// Proxies returns the node agents.
func (c testbedCluster) Proxies() []Proxy {
	ags := c.Agents()
	out := make([]Proxy, len(ags))
	for i, ag := range ags {
		out[i] = ag
	}
	return out
}

// WriteNodeState writes every node's rule dump and connection state.
func (c testbedCluster) WriteNodeState(ctx context.Context, w io.Writer) error {
	return measure.WriteNodeState(ctx, c.Testbed, w)
}

// KernelRules counts node 0's rules.
func (c testbedCluster) KernelRules(ctx context.Context) (int, error) {
	return measure.KernelRules(ctx, c.Testbed)
}

// ControlPlane is the lab's real API server, when one runs.
func (c testbedCluster) ControlPlane() *controlplane.ControlPlane { return c.Testbed.ControlPlane() }

// labProber is a lab prober as a Prober (Dial's connection as a measure.Conn).
type labProber struct{ *probe.Prober }

// Dial opens a kept connection.
func (p labProber) Dial(ctx context.Context, target probe.Destination, opts probe.Options) (measure.Conn, error) {
	conn, err := p.Prober.Dial(ctx, target, opts)
	if err != nil {
		return nil, err
	}
	return conn, nil
}
