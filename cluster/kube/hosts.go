package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kpbench.dev/kpbench/apistore"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// Info says what the cluster is: its version, node count and kube-proxy's mode (asked
// of the first node's hostNetwork prober: call it after WaitSynced).
func (c *Cluster) Info(ctx context.Context) *cluster.Info {
	info := &cluster.Info{ServerVersion: c.version, Nodes: len(c.nodes)}
	info.ProxyMode, info.ProxyModeNote = c.ProxyMode(ctx)
	return info
}

// Host returns node-N (the N-th node), client-N (a client kpbench does not have on a
// cluster: its prober is not available) or a pod of the run.
func (c *Cluster) Host(name string) (lab.Host, bool) {
	for i, n := range c.nodes {
		if name == "node-"+strconv.Itoa(i) {
			return lab.Host{Name: name, Kind: lab.KindNode, IP: n.IP}, true
		}
	}
	if strings.HasPrefix(name, "client-") {
		return lab.Host{Name: name, Kind: lab.KindClient}, true
	}
	return c.PodHost(scenarioNamespace, name)
}

// Hosts returns the nodes (as node-N) or the run's pods with a pod-network address, in
// name order; no clients.
func (c *Cluster) Hosts(kind lab.HostKind) []lab.Host {
	switch kind {
	case lab.KindNode:
		var out []lab.Host
		for i, n := range c.nodes {
			out = append(out, lab.Host{Name: "node-" + strconv.Itoa(i), Kind: lab.KindNode, IP: n.IP})
		}
		return out
	case lab.KindPod:
		c.mu.Lock()
		defer c.mu.Unlock()
		var out []lab.Host
		for _, p := range c.pods {
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if err != nil || p.Spec.HostNetwork {
				continue
			}
			out = append(out, lab.Host{Name: p.Name, Kind: lab.KindPod, IP: ip, Node: c.labNode(p.Spec.NodeName), Labels: p.Labels})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	return nil // kpbench has no client outside a cluster it did not build
}

// PodHost returns a pod of the run with a pod-network address.
func (c *Cluster) PodHost(_, name string) (lab.Host, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.Name != name || p.Spec.HostNetwork {
			continue
		}
		ip, _ := netip.ParseAddr(p.Status.PodIP)
		return lab.Host{Name: p.Name, Kind: lab.KindPod, IP: ip, Node: c.labNode(p.Spec.NodeName), Labels: p.Labels,
			Ready: apistore.PodReady(p), Terminating: p.DeletionTimestamp != nil}, true
	}
	return lab.Host{}, false
}

// ProbeHost names the node's prober pod.
func (c *Cluster) ProbeHost(node string) string { return proberName(c.realNode(node)) }

// synthPort is the port AddPod's pods serve, TCP and UDP: the lab pods' default port.
const synthPort = 8080

// AddPod creates an agnhost netexec pod (HTTP and UDP on synthPort, as the lab's pods) on
// node and waits until it has an address.
func (c *Cluster) AddPod(ctx context.Context, name, node string) (lab.Host, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: c.realNode(node), Containers: []corev1.Container{{Name: "echo", Image: "agnhost",
			Ports: []corev1.ContainerPort{{ContainerPort: synthPort}, {ContainerPort: synthPort, Protocol: corev1.ProtocolUDP}}}}},
	}
	if err := c.Apply(ctx, pod); err != nil {
		return lab.Host{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	var h lab.Host
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		p, err := c.client.CoreV1().Pods(c.namespace).Get(ctx, name, metav1.GetOptions{})
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
func (c *Cluster) ClientFor(client, targetNode string) (lab.Host, string, error) {
	for _, n := range c.Hosts(lab.KindNode) {
		if n.Name != targetNode {
			return n, fmt.Sprintf(" (%s sent from %s's host network: kpbench has no client outside the cluster)", client, n.Name), nil
		}
	}
	return lab.Host{}, "", fmt.Errorf("probes from %s: %w (kpbench has no client outside the cluster, and no node other than %s to send from)", client, cluster.ErrNotAvailable, targetNode)
}

// AddClientRoute is not available: kpbench has no client outside the cluster.
func (c *Cluster) AddClientRoute(context.Context, netip.Prefix) error {
	return fmt.Errorf("route to a load-balancer or external IP: %w (needs a client outside the cluster routed to the IP)", cluster.ErrNotAvailable)
}

// Prober returns the prober of a host: node-N's hostNetwork prober, a prober pod, or a
// pod of the run (its netexec).
func (c *Cluster) Prober(host string) (cluster.Prober, error) {
	r, err := c.requester(host)
	if err != nil {
		return nil, err
	}
	return podProber{r}, nil
}

// NewProber returns a prober of the caller's own (the same: probes hold no state).
func (c *Cluster) NewProber(host string, _ int) (cluster.ProberCloser, error) {
	r, err := c.requester(host)
	if err != nil {
		return nil, err
	}
	return podProber{r}, nil
}

// requester returns the /dial sender of a host: node-N's hostNetwork prober, a prober
// pod (kpb-prober-<node>, kpb-hprober-<node>), or a pod of the run that runs netexec.
func (c *Cluster) requester(host string) (*dialRequester, error) {
	for i, n := range c.nodes {
		if host == "node-"+strconv.Itoa(i) {
			return &dialRequester{c: c, pod: hostProberName(n.Name), port: hostProberPort(c.opts.RunID)}, nil
		}
	}
	if strings.HasPrefix(host, "client-") {
		return nil, fmt.Errorf("probes from %s: %w (kpbench has no client outside the cluster)", host, cluster.ErrNotAvailable)
	}
	for _, n := range c.nodes {
		switch host {
		case proberName(n.Name):
			return &dialRequester{c: c, pod: host, port: proberPort}, nil
		case hostProberName(n.Name):
			return &dialRequester{c: c, pod: host, port: hostProberPort(c.opts.RunID)}, nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.Name == host && len(p.Spec.Containers) > 0 {
			for _, a := range p.Spec.Containers[0].Args {
				if v, ok := strings.CutPrefix(a, "--http-port="); ok {
					if port, err := strconv.Atoi(v); err == nil && port > 0 {
						return &dialRequester{c: c, pod: host, port: int32(port)}, nil
					}
				}
			}
			return nil, fmt.Errorf("pod %s runs no netexec to send probes from", host)
		}
	}
	return nil, fmt.Errorf("no host %q in the run", host)
}

// podProber sends probes from a pod of the run through netexec's /dial. A probe's latency is the whole
// round trip: API server, kubelet's proxy, netexec, the Service, and back.
type podProber struct{ r *dialRequester }

// Request sends one probe; a fixed source port is not available (netexec picks its own).
func (p podProber) Request(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result {
	if opts.SourcePort != 0 {
		err := fmt.Errorf("probe from source port %d: %w (netexec's /dial picks its own port)", opts.SourcePort, cluster.ErrNotAvailable)
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
func (p podProber) Connect(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result {
	if opts.SourcePort != 0 {
		return p.Request(ctx, target, opts)
	}
	res := p.r.Request(ctx, target, opts)
	res.Connect = res.Total
	return res
}

// Dial is not available: a kept connection would live in the prober pod.
func (p podProber) Dial(context.Context, probe.Destination, probe.Options) (cluster.Conn, error) {
	return nil, fmt.Errorf("kept connection: %w", cluster.ErrNotAvailable)
}

// DialContext is not available: connections start in the prober pod.
func (p podProber) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, fmt.Errorf("connection from a prober pod: %w", cluster.ErrNotAvailable)
}

// Close does nothing.
func (p podProber) Close() error { return nil }

// Proxies returns none: a real cluster's proxies are not kpbench's.
func (c *Cluster) Proxies() []cluster.Proxy { return nil }

// WriteNodeState is not available on a real cluster.
func (c *Cluster) WriteNodeState(_ context.Context, w io.Writer) error {
	_, _ = io.WriteString(w, "node state: not available on a real cluster (kpbench does not read its nodes' rules)\n")
	return fmt.Errorf("node state: %w", cluster.ErrNotAvailable)
}

// KernelRules is not available on a real cluster.
func (c *Cluster) KernelRules(context.Context) (int, error) {
	return 0, fmt.Errorf("kernel rules: %w (kpbench does not read a real cluster's nodes)", cluster.ErrNotAvailable)
}

// maxWaitServices bounds the Services WaitSynced probes: beyond it, the first, middle and
// last Services stand for the others.
