package apistore

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// needsClusterIP reports whether a Service of this type has a ClusterIP field at all.
func needsClusterIP(s *corev1.Service) bool { return s.Spec.Type != corev1.ServiceTypeExternalName }

// allocatesNodePorts reports whether ports without a nodePort get one allocated: NodePort
// Services, and LoadBalancer Services unless allocateLoadBalancerNodePorts is false.
func allocatesNodePorts(s *corev1.Service) bool {
	switch s.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return s.Spec.AllocateLoadBalancerNodePorts == nil || *s.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

// mayHaveNodePorts reports whether the type allows node ports at all.
func mayHaveNodePorts(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// needsHealthCheckNodePort is the API server's rule: LoadBalancer with
// externalTrafficPolicy Local (not NodePort, although kube-proxy would serve one).
func needsHealthCheckNodePort(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// isKubernetesService reports whether s is default/kubernetes, which owns the first ClusterIP.
func isKubernetesService(s *corev1.Service) bool {
	return s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes"
}

// allocations are the IPs and ports one Service holds.
type allocations struct {
	clusterIP netip.Addr
	nodePorts map[int32]bool
	hcPort    int32
	lbIP      netip.Addr
}

func allocationsOf(s *corev1.Service) allocations {
	a := allocations{nodePorts: map[int32]bool{}}
	if s == nil {
		return a
	}
	if needsClusterIP(s) {
		if ip, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil {
			a.clusterIP = ip
		}
	}
	for _, p := range s.Spec.Ports {
		if p.NodePort != 0 {
			a.nodePorts[p.NodePort] = true
		}
	}
	a.hcPort = s.Spec.HealthCheckNodePort
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range s.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil && !a.lbIP.IsValid() {
				a.lbIP = ip
			}
		}
	}
	return a
}

// applyService creates or updates a Service, allocating what it needs.
func (t *tx) applyService(in *corev1.Service) error {
	svc, err := userCopy(in)
	if err != nil {
		return err
	}
	key := objKey{svc.Namespace, svc.Name}
	var old *corev1.Service
	if o, ok := t.c.objs[KindService][key]; ok {
		old = o.(*corev1.Service)
	}
	svc.Status = corev1.ServiceStatus{} // status is the server's, not the user's
	if err := t.allocateClusterIP(svc, old); err != nil {
		return fmt.Errorf("spec.clusterIP: %w", err)
	}
	if err := t.allocateNodePorts(svc, old); err != nil {
		return err
	}
	if err := t.allocateHealthCheckNodePort(svc, old); err != nil {
		return fmt.Errorf("spec.healthCheckNodePort: %w", err)
	}
	if err := t.allocateLoadBalancerIP(svc, old); err != nil {
		return fmt.Errorf("status.loadBalancer: %w", err)
	}
	t.releaseUnused(allocationsOf(old), allocationsOf(svc))
	t.put(KindService, svc)
	t.dirty[key] = true
	return nil
}

// deleteService removes a Service, its allocations and its managed EndpointSlices.
func (t *tx) deleteService(key objKey) {
	old := t.c.objs[KindService][key].(*corev1.Service)
	t.releaseUnused(allocationsOf(old), allocationsOf(nil))
	t.remove(KindService, key)
	t.dirty[key] = true // the endpoints controller removes the slices
}

// releaseUnused releases what before held and after does not.
func (t *tx) releaseUnused(before, after allocations) {
	c := t.c
	if ip := before.clusterIP; ip.IsValid() && ip != after.clusterIP {
		c.clusterIPs.release(ip)
		t.onUndo(func() { c.clusterIPs.bits.set(c.clusterIPs.index(ip)) })
	}
	for p := range before.nodePorts {
		if !after.nodePorts[p] && p != after.hcPort {
			t.releasePort(p)
		}
	}
	if p := before.hcPort; p != 0 && p != after.hcPort && !after.nodePorts[p] {
		t.releasePort(p)
	}
	if ip := before.lbIP; ip.IsValid() && ip != after.lbIP {
		c.lbIPs.release(ip)
		t.onUndo(func() { c.lbIPs.bits.set(c.lbIPs.index(ip)) })
	}
}

func (t *tx) releasePort(p int32) {
	a := t.c.nodePorts
	a.release(p)
	t.onUndo(func() { _ = a.allocate(p) })
}

func (t *tx) takeIP(a *ipAllocator, ip netip.Addr, reservedOK bool) error {
	if err := a.allocate(ip, reservedOK); err != nil {
		return err
	}
	t.onUndo(func() { a.release(ip) })
	return nil
}

func (t *tx) nextIP(a *ipAllocator) (netip.Addr, error) {
	cursor := a.cursor
	ip, err := a.next()
	if err != nil {
		return ip, err
	}
	t.onUndo(func() { a.release(ip); a.cursor = cursor })
	return ip, nil
}

func (t *tx) takePort(p int32) error {
	a := t.c.nodePorts
	if err := a.allocate(p); err != nil {
		return err
	}
	t.onUndo(func() { a.release(p) })
	return nil
}

func (t *tx) nextPort() (int32, error) {
	a := t.c.nodePorts
	cursor := a.cursor
	p, err := a.next()
	if err != nil {
		return 0, err
	}
	t.onUndo(func() { a.release(p); a.cursor = cursor })
	return p, nil
}

// allocateClusterIP fills spec.clusterIP(s) and ipFamilies as the API server does. The
// ClusterIP is immutable once set, except by changing the type to or from ExternalName.
func (t *tx) allocateClusterIP(svc, old *corev1.Service) error {
	if !needsClusterIP(svc) {
		if svc.Spec.ClusterIP != "" {
			return fmt.Errorf("must be empty for type ExternalName, got %q", svc.Spec.ClusterIP)
		}
		svc.Spec.ClusterIPs = nil
		svc.Spec.IPFamilies = nil
		svc.Spec.IPFamilyPolicy = nil
		return nil
	}
	single := corev1.IPFamilyPolicySingleStack
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	svc.Spec.IPFamilyPolicy = &single
	if old != nil && needsClusterIP(old) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if svc.Spec.ClusterIP != old.Spec.ClusterIP {
			return fmt.Errorf("field is immutable: %q cannot become %q", old.Spec.ClusterIP, svc.Spec.ClusterIP)
		}
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		return nil
	}
	switch svc.Spec.ClusterIP {
	case corev1.ClusterIPNone:
		svc.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
		return nil
	case "":
		if isKubernetesService(svc) {
			first := t.c.clusterIPs.addr(1)
			if err := t.takeIP(t.c.clusterIPs, first, true); err == nil {
				svc.Spec.ClusterIP = first.String()
				break
			}
		}
		ip, err := t.nextIP(t.c.clusterIPs)
		if err != nil {
			return err
		}
		svc.Spec.ClusterIP = ip.String()
	default:
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !ip.Is4() {
			return fmt.Errorf("%q is not an IPv4 address", svc.Spec.ClusterIP)
		}
		if err := t.takeIP(t.c.clusterIPs, ip, isKubernetesService(svc)); err != nil {
			return err
		}
		svc.Spec.ClusterIP = ip.String()
	}
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	return nil
}

// allocateNodePorts fills spec.ports[*].nodePort as the API server does: a port left at 0
// keeps the node port the old object had under the same port name; ports with the same port
// number share one node port (TCP and UDP of a DNS-like service); a node port is never
// shared between Services, whatever the protocol.
func (t *tx) allocateNodePorts(svc, old *corev1.Service) error {
	ports := svc.Spec.Ports
	if !mayHaveNodePorts(svc) {
		for i := range ports {
			if ports[i].NodePort != 0 {
				return fmt.Errorf("spec.ports[%d].nodePort: may not be used when type is %q", i, svc.Spec.Type)
			}
		}
		return nil
	}
	held := allocationsOf(old).nodePorts
	if old != nil && old.Spec.HealthCheckNodePort != 0 {
		held[old.Spec.HealthCheckNodePort] = true
	}
	if old != nil && mayHaveNodePorts(old) {
		// Patch unset node ports from the old object by port name, unless the new spec
		// gives that value to another port.
		requested := map[int32]bool{}
		for _, p := range ports {
			if p.NodePort != 0 {
				requested[p.NodePort] = true
			}
		}
		byName := map[string]int32{}
		for _, p := range old.Spec.Ports {
			byName[p.Name] = p.NodePort
		}
		for i := range ports {
			if ports[i].NodePort == 0 && allocatesNodePorts(svc) {
				if v := byName[ports[i].Name]; v != 0 && !requested[v] {
					ports[i].NodePort = v
				}
			}
		}
	}
	type owner struct {
		port      int32
		protocols map[corev1.Protocol]bool
	}
	owners := map[int32]*owner{}    // node port → which service port holds it
	byPort := map[int32]int32{}     // service port number → its node port
	firstAsked := map[int32]int32{} // service port number → first requested node port
	for _, p := range ports {
		if p.NodePort != 0 && firstAsked[p.Port] == 0 {
			firstAsked[p.Port] = p.NodePort
		}
	}
	for i := range ports {
		p := &ports[i]
		if p.NodePort == 0 && !allocatesNodePorts(svc) {
			continue
		}
		if p.NodePort == 0 {
			if np := byPort[p.Port]; np != 0 {
				p.NodePort = np
			} else if np := firstAsked[p.Port]; np != 0 {
				p.NodePort = np
			}
		}
		if p.NodePort == 0 {
			np, err := t.nextPort()
			if err != nil {
				return fmt.Errorf("spec.ports[%d].nodePort: %w", i, err)
			}
			p.NodePort = np
		} else if o := owners[p.NodePort]; o != nil {
			if o.port != p.Port || o.protocols[p.Protocol] {
				return fmt.Errorf("spec.ports[%d].nodePort: %d is already used by another port of this service", i, p.NodePort)
			}
		} else if !held[p.NodePort] {
			if err := t.takePort(p.NodePort); err != nil {
				return fmt.Errorf("spec.ports[%d].nodePort: %w", i, err)
			}
		}
		if owners[p.NodePort] == nil {
			owners[p.NodePort] = &owner{port: p.Port, protocols: map[corev1.Protocol]bool{}}
		}
		owners[p.NodePort].protocols[p.Protocol] = true
		if byPort[p.Port] == 0 {
			byPort[p.Port] = p.NodePort
		}
	}
	return nil
}

// allocateHealthCheckNodePort fills spec.healthCheckNodePort for LoadBalancer Services with
// externalTrafficPolicy Local, keeping the old value when the new spec leaves it unset.
func (t *tx) allocateHealthCheckNodePort(svc, old *corev1.Service) error {
	if !needsHealthCheckNodePort(svc) {
		if svc.Spec.HealthCheckNodePort != 0 {
			return fmt.Errorf("may only be set for type LoadBalancer with externalTrafficPolicy Local")
		}
		return nil
	}
	var held int32
	if old != nil && needsHealthCheckNodePort(old) {
		held = old.Spec.HealthCheckNodePort
	}
	if svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = held
	}
	for _, p := range svc.Spec.Ports {
		if svc.Spec.HealthCheckNodePort != 0 && p.NodePort == svc.Spec.HealthCheckNodePort {
			return fmt.Errorf("%d is already used as a node port of this service", p.NodePort)
		}
	}
	switch {
	case svc.Spec.HealthCheckNodePort == 0:
		p, err := t.nextPort()
		if err != nil {
			return err
		}
		svc.Spec.HealthCheckNodePort = p
	case svc.Spec.HealthCheckNodePort != held:
		if old != nil && allocationsOf(old).nodePorts[svc.Spec.HealthCheckNodePort] {
			return nil // moved from a node port of the same service, which is released
		}
		return t.takePort(svc.Spec.HealthCheckNodePort)
	}
	return nil
}

// allocateLoadBalancerIP writes status.loadBalancer.ingress for LoadBalancer Services, as a
// load-balancer controller would: spec.loadBalancerIP if set (it must be in the pool),
// otherwise the IP the Service already had, otherwise the next free one of the pool.
func (t *tx) allocateLoadBalancerIP(svc, old *corev1.Service) error {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	held := allocationsOf(old).lbIP
	var ip netip.Addr
	switch {
	case svc.Spec.LoadBalancerIP != "":
		want, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
		if err != nil || !want.Is4() {
			return fmt.Errorf("spec.loadBalancerIP %q is not an IPv4 address", svc.Spec.LoadBalancerIP)
		}
		if want != held {
			if err := t.takeIP(t.c.lbIPs, want, false); err != nil {
				return err
			}
		}
		ip = want
	case held.IsValid():
		ip = held
	default:
		var err error
		if ip, err = t.nextIP(t.c.lbIPs); err != nil {
			return err
		}
	}
	vip := corev1.LoadBalancerIPModeVIP
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String(), IPMode: &vip}}
	return nil
}
