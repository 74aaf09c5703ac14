//go:build linux

package testbed

import (
	"context"
	"fmt"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
)

// The testbed is the lab as a cluster under test: objects in its control plane, probes
// from its namespaces, its node agents as the proxies. The rest of cluster.Cluster is in
// access.go (objects, hosts, probers), testbed.go (Apply, WaitSynced) and state.go (node
// state, kernel rules).
var _ cluster.Cluster = (*Testbed)(nil)

// SetPodConditions sets a pod's conditions as its kubelet would report them, keeping
// the unset ones.
func (tb *Testbed) SetPodConditions(_ context.Context, namespace, name string, ready, terminating *bool) error {
	h, ok := tb.PodHost(namespace, name)
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
	return tb.SetPodReady(namespace, name, r, t)
}

// ProbeHost names the node's probe pod (Options.ProbePods).
func (tb *Testbed) ProbeHost(node string) string { return ProbePod(node) }

// ClientFor is the client itself: the lab has clients outside the cluster.
func (tb *Testbed) ClientFor(client, _ string) (lab.Host, string, error) {
	h, ok := tb.Host(client)
	if !ok {
		return lab.Host{}, "", fmt.Errorf("no host %q in the lab", client)
	}
	return h, "", nil
}

// Proxies returns the node agents.
func (tb *Testbed) Proxies() []cluster.Proxy {
	out := make([]cluster.Proxy, len(tb.agents))
	for i, ag := range tb.agents {
		out[i] = ag
	}
	return out
}

// Info is nil: the lab runs on this machine, whose environment the results record.
func (tb *Testbed) Info(context.Context) *cluster.Info { return nil }
