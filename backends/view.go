package backends

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Labels that take objects out of every proxy's view, as kube-proxy's informers filter
// them: a Service labelled service-proxy-name, an EndpointSlice labelled headless (the
// EndpointSlice controller labels the slices of clusterIP None Services so; kube-proxy
// v1.37 filters Services by service-proxy-name and clusterIP, EndpointSlices by headless).
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = "service.kubernetes.io/headless"
)

// DefaultAffinityTimeoutSeconds is the ClientIP affinity timeout when the Service sets none.
const DefaultAffinityTimeoutSeconds int32 = 10800

// NodeView is the node a State is built for.
type NodeView struct {
	// Name is the node's name; endpoints whose nodeName equals it are local.
	Name string
	// IPs are the node's addresses, where node ports are served.
	IPs []netip.Addr
	// Zone is the node's topology zone (informational: topology hints are not modelled).
	Zone string
}

// ViewOptions are the proxy settings that shape the State beyond the API objects.
type ViewOptions struct {
	// ClusterCIDR is the pod network (kube-proxy's clusterCIDR); zero for none.
	ClusterCIDR netip.Prefix
	// MasqueradeAll is kube-proxy's masqueradeAll.
	MasqueradeAll bool
	// ServiceCIDRs are the ranges ClusterIPs are allocated from (the API server's
	// ServiceCIDR objects, which kube-proxy watches).
	ServiceCIDRs []netip.Prefix
}

// BuildState builds the desired state of one node from Services and EndpointSlices, as
// kube-proxy's ServiceChangeTracker and EndpointsChangeTracker do for an IPv4 proxier:
//
//   - one ServicePort per port of each Service, except Services of type ExternalName,
//     headless ones (clusterIP None or empty) and Services labelled
//     service.kubernetes.io/service-proxy-name;
//   - externalIPs, load-balancer ingress IPs (not those with ipMode Proxy) and source ranges
//     keep their IPv4 members only; ClientIP affinity timeout defaults to 10800 seconds;
//     externalTrafficPolicy Local counts only for NodePort and LoadBalancer Services or
//     Services with externalIPs; the health-check node port only for LoadBalancer Services
//     with externalTrafficPolicy Local;
//   - endpoints come from every IPv4 EndpointSlice labelled kubernetes.io/service-name with
//     the Service's name in its namespace and not labelled service.kubernetes.io/headless, from the slice port with the same name and
//     protocol, using the first address of each endpoint. Conditions follow the API
//     contract kube-proxy applies: nil ready and nil serving mean true, nil terminating
//     means false. Duplicates (the same IP:port in two slices) are merged, the first one
//     seen winning, slices taken in namespace/name order.
//
// The inputs are not modified. Services are sorted by name and endpoints by IP and port.
func BuildState(node NodeView, opts ViewOptions, services []*corev1.Service, epSlices []*discoveryv1.EndpointSlice) *State {
	st := &State{
		NodeName:      node.Name,
		NodeIPs:       append([]netip.Addr(nil), node.IPs...),
		ClusterCIDR:   opts.ClusterCIDR,
		MasqueradeAll: opts.MasqueradeAll,
		ServiceCIDRs:  append([]netip.Prefix(nil), opts.ServiceCIDRs...),
	}
	type svcKey struct{ ns, name string }
	bySvc := map[svcKey][]*discoveryv1.EndpointSlice{}
	for _, s := range epSlices {
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" || s.AddressType != discoveryv1.AddressTypeIPv4 || IgnoredSlice(s) {
			continue
		}
		k := svcKey{s.Namespace, name}
		bySvc[k] = append(bySvc[k], s)
	}
	for k := range bySvc {
		sortSlices(bySvc[k])
	}
	for _, svc := range services {
		clusterIP, ok := proxiedClusterIP(svc)
		if !ok {
			continue
		}
		for i := range svc.Spec.Ports {
			sp := newServicePort(svc, &svc.Spec.Ports[i], clusterIP)
			sp.Endpoints = endpointsFor(sp.Name, node.Name, bySvc[svcKey{svc.Namespace, svc.Name}])
			st.Services = append(st.Services, sp)
		}
	}
	st.SortServices()
	return st
}

// proxiedClusterIP returns the Service's IPv4 ClusterIP, or false when no proxy rules are
// made for it.
func proxiedClusterIP(svc *corev1.Service) (netip.Addr, bool) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return netip.Addr{}, false
	}
	if _, ok := svc.Labels[LabelServiceProxyName]; ok {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, false // "None", "" or not IPv4
	}
	return ip, true
}

// IgnoredSlice reports whether proxies ignore an EndpointSlice: kube-proxy's EndpointSlice
// informer filters out those labelled service.kubernetes.io/headless.
func IgnoredSlice(s *discoveryv1.EndpointSlice) bool {
	_, ok := s.Labels[LabelHeadless]
	return ok
}

func protocolOf(p corev1.Protocol) Protocol {
	if p == "" {
		return TCP
	}
	return Protocol(p)
}

// newServicePort is kube-proxy's newBaseServiceInfo for one port, without endpoints.
func newServicePort(svc *corev1.Service, p *corev1.ServicePort, clusterIP netip.Addr) *ServicePort {
	sp := &ServicePort{
		Name: ServicePortName{Namespace: svc.Namespace, Name: svc.Name, Port: p.Name,
			Protocol: protocolOf(p.Protocol)},
		ClusterIP: clusterIP,
		Port:      p.Port,
		NodePort:  p.NodePort,
	}
	for _, s := range svc.Spec.ExternalIPs {
		if ip, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && ip.Is4() {
			sp.ExternalIPs = append(sp.ExternalIPs, ip)
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy {
			continue
		}
		if ip, err := netip.ParseAddr(ing.IP); err == nil && ip.Is4() {
			sp.LoadBalancerIPs = append(sp.LoadBalancerIPs, ip)
		}
	}
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		if pfx, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && pfx.Addr().Is4() {
			sp.LoadBalancerSourceRanges = append(sp.LoadBalancerSourceRanges, pfx.Masked())
		}
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		sp.AffinityClientIP = true
		sp.AffinityTimeoutSeconds = DefaultAffinityTimeoutSeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			sp.AffinityTimeoutSeconds = *c.ClientIP.TimeoutSeconds
		}
	}
	externallyReachable := svc.Spec.Type == corev1.ServiceTypeNodePort ||
		svc.Spec.Type == corev1.ServiceTypeLoadBalancer || len(svc.Spec.ExternalIPs) > 0
	sp.ExternalPolicyLocal = externallyReachable &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	sp.InternalPolicyLocal = svc.Spec.InternalTrafficPolicy != nil &&
		*svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		sp.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
	}
	return sp
}

// sortSlices orders slices by name, so that duplicate endpoints resolve the same way
// whatever order the caller listed them in.
func sortSlices(s []*discoveryv1.EndpointSlice) {
	slices.SortFunc(s, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
}

// endpointsFor collects the endpoints of one service port from its slices.
func endpointsFor(name ServicePortName, nodeName string, epSlices []*discoveryv1.EndpointSlice) []Endpoint {
	var eps []Endpoint
	seen := map[netip.AddrPort]bool{}
	for _, s := range epSlices {
		var port int32
		found := false
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			pname := ""
			if p.Name != nil {
				pname = *p.Name
			}
			proto := TCP
			if p.Protocol != nil {
				proto = protocolOf(*p.Protocol)
			}
			if pname == name.Port && proto == name.Protocol {
				port, found = *p.Port, true
				break
			}
		}
		if !found {
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(e.Addresses[0])
			if err != nil || !ip.Is4() {
				continue
			}
			ap := netip.AddrPortFrom(ip, uint16(port))
			if seen[ap] {
				continue
			}
			seen[ap] = true
			ep := Endpoint{
				IP:          ip,
				Port:        port,
				Ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
				Serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
				Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
			}
			if e.NodeName != nil {
				ep.NodeName = *e.NodeName
				ep.IsLocal = nodeName != "" && ep.NodeName == nodeName
			}
			if e.Zone != nil {
				ep.Zone = *e.Zone
			}
			eps = append(eps, ep)
		}
	}
	sortEndpoints(eps)
	return eps
}
