//go:build linux

package scenarios

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/manifest"
)

// Resolving what scenario files name (hosts, pods, destinations) against a running cluster.

// resolveHost turns "client-0", "node-1", "probe-node-0", "pod:NAME" or "pod:NS/NAME"
// into a host.
func resolveHost(c cluster.Cluster, from string) (lab.Host, error) {
	if rest, ok := strings.CutPrefix(from, "pod:"); ok {
		ns, name := splitName(rest)
		pod, err := resolvePod(c, ns, name)
		if err != nil {
			return lab.Host{}, err
		}
		h, ok := c.PodHost(ns, pod)
		if !ok {
			return lab.Host{}, fmt.Errorf("pod %s/%s has no host in the lab", ns, pod)
		}
		return h, nil
	}
	h, ok := c.Host(from)
	if !ok {
		return lab.Host{}, fmt.Errorf("no host %q in the lab", from)
	}
	return h, nil
}

// resolveSender resolves a step's host as resolveHost does, and a client (client-N) to
// the host that sends its traffic to targetNode on this cluster (Hosts.ClientFor), with
// the note that says so for the evidence.
func resolveSender(c cluster.Cluster, from, targetNode string) (lab.Host, string, error) {
	h, err := resolveHost(c, from)
	if err != nil || h.Kind != lab.KindClient {
		return h, "", err
	}
	return c.ClientFor(h.Name, targetNode)
}

// resolvePod finds a pod by its name, or by "<deployment>-<ordinal>": the ordinal-th pod
// of a Deployment in creation order (Deployment pods have generated names).
func resolvePod(c cluster.Cluster, ns, name string) (string, error) {
	pods := c.Pods()
	for _, p := range pods {
		if p.Namespace == ns && p.Name == name {
			return p.Name, nil
		}
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if ord, err := strconv.Atoi(name[i+1:]); err == nil {
			deploy := name[:i]
			var owned []string
			for _, p := range pods {
				if p.Namespace == ns && strings.HasPrefix(p.Name, deploy+"-") && p.Labels["pod-template-hash"] != "" &&
					strings.Count(p.Name[len(deploy)+1:], "-") == 1 {
					owned = append(owned, p.Name)
				}
			}
			sortByCreation(pods, owned)
			if ord < len(owned) {
				return owned[ord], nil
			}
		}
	}
	return "", fmt.Errorf("no pod %s/%s (Deployment pods are addressed as <deployment>-<ordinal>)", ns, name)
}

// sortByCreation orders pod names by their pods' creation time (then name).
func sortByCreation(pods []*corev1.Pod, names []string) {
	created := map[string]time.Time{}
	for _, p := range pods {
		created[p.Name] = p.CreationTimestamp.Time
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := created[a].Compare(created[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// resolveDestination returns the address of a destination and the service port behind it (nil for
// a literal address).
func resolveDestination(c cluster.Cluster, d Destination) (netip.AddrPort, *backends.ServicePort, error) {
	if d.IPPort != "" {
		ap, err := netip.ParseAddrPort(d.IPPort)
		return ap, nil, err
	}
	ns, name := splitName(d.Service)
	view := backends.BuildState(backends.NodeView{}, backends.ViewOptions{}, c.Services(), c.EndpointSlices())
	var sp *backends.ServicePort
	for _, p := range view.Services {
		if p.Name.Namespace == ns && p.Name.Name == name && (d.Port == "" || p.Name.Port == d.Port) {
			sp = p
			break
		}
	}
	if sp == nil {
		// A Service the proxy ignores (labelled service.kubernetes.io/service-proxy-name)
		// still has a ClusterIP to probe: the probe shows that nothing handles it.
		if ap, ok := unproxiedClusterIP(c, ns, name, d); ok {
			return ap, nil, nil
		}
		return netip.AddrPort{}, nil, fmt.Errorf("no proxied service port %s/%s %s (headless and ExternalName Services have none)", ns, name, d.Port)
	}
	switch d.Address {
	case "", AddressClusterIP:
		return netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port)), sp, nil
	case AddressNodePort:
		if sp.NodePort == 0 {
			return netip.AddrPort{}, sp, fmt.Errorf("service %s/%s has no node port", ns, name)
		}
		node := d.Node
		if node == "" {
			node = lab.NodeName(0)
		}
		h, ok := c.Host(node)
		if !ok {
			return netip.AddrPort{}, sp, fmt.Errorf("no node %q", node)
		}
		return netip.AddrPortFrom(h.IP, uint16(sp.NodePort)), sp, nil
	case AddressLoadBalancer, AddressExternalIP:
		ips := sp.LoadBalancerIPs
		if d.Address == AddressExternalIP {
			ips = sp.ExternalIPs
		}
		if len(ips) == 0 {
			return netip.AddrPort{}, sp, fmt.Errorf("service %s/%s has no %s address", ns, name, d.Address)
		}
		return netip.AddrPortFrom(ips[0], uint16(sp.Port)), sp, nil
	}
	return netip.AddrPort{}, sp, fmt.Errorf("unknown address kind %q", d.Address)
}

// unproxiedClusterIP returns the ClusterIP:port of a Service the proxy does not handle
// (kept out by a label), for a clusterIP target.
func unproxiedClusterIP(c cluster.Cluster, ns, name string, d Destination) (netip.AddrPort, bool) {
	if d.Address != "" && d.Address != AddressClusterIP {
		return netip.AddrPort{}, false
	}
	for _, svc := range c.Services() {
		if svc.Namespace != ns || svc.Name != name {
			continue
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil {
			return netip.AddrPort{}, false
		}
		for _, p := range svc.Spec.Ports {
			if d.Port == "" || p.Name == d.Port {
				return netip.AddrPortFrom(ip, uint16(p.Port)), true
			}
		}
	}
	return netip.AddrPort{}, false
}

// readyPods returns the pod names of the endpoints traffic may use (ready, else serving
// and terminating), sorted.
func readyPods(c cluster.Cluster, sp *backends.ServicePort) []string {
	byIP := podNames(c)
	var out []string
	for _, ep := range backends.CategorizeEndpoints(sp).Cluster {
		out = append(out, byIP[ep.IP])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// podNames maps every pod host's address to its name.
func podNames(c cluster.Cluster) map[netip.Addr]string {
	byIP := map[netip.Addr]string{}
	for _, h := range c.Hosts(lab.KindPod) {
		byIP[h.IP] = h.Name
	}
	return byIP
}

// healthDestination returns the address of an httpStatus destination: a node's address with the
// Service's health-check node port, or a literal ip:port.
func healthDestination(c cluster.Cluster, d Destination) (netip.AddrPort, error) {
	if d.IPPort != "" {
		return netip.ParseAddrPort(d.IPPort)
	}
	ns, name := splitName(d.Service)
	o, err := c.Get(manifest.KindService, ns, name)
	if err != nil {
		return netip.AddrPort{}, err
	}
	svc, ok := o.(*corev1.Service)
	if !ok || svc.Spec.HealthCheckNodePort == 0 {
		return netip.AddrPort{}, fmt.Errorf("service %s/%s has no health-check node port", ns, name)
	}
	node := d.Node
	if node == "" {
		node = lab.NodeName(0)
	}
	h, ok := c.Host(node)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no node %q", node)
	}
	return netip.AddrPortFrom(h.IP, uint16(svc.Spec.HealthCheckNodePort)), nil
}
