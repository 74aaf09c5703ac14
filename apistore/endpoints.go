package apistore

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The EndpointSlice controller's constants.
const (
	// ControllerName is the endpointslice.kubernetes.io/managed-by value of managed slices.
	ControllerName = "endpointslice-controller.k8s.io"
	// MaxEndpointsPerSlice is the controller's default --max-endpoints-per-slice.
	MaxEndpointsPerSlice = 100
	// LabelHeadless is set on the slices of headless Services.
	LabelHeadless = "service.kubernetes.io/headless"
)

// isManaged reports whether slice labels mark it as the controller's.
func isManaged(labels map[string]string) bool {
	return labels[discoveryv1.LabelManagedBy] == ControllerName && labels[discoveryv1.LabelServiceName] != ""
}

// applySlice stores a user-supplied EndpointSlice, for a Service without a selector (or
// additional endpoints of any Service, which kube-proxy merges like Kubernetes does).
func (t *tx) applySlice(in *discoveryv1.EndpointSlice) error {
	s, err := userCopy(in)
	if err != nil {
		return err
	}
	if s.Labels[discoveryv1.LabelManagedBy] == ControllerName {
		return fmt.Errorf("metadata.labels[%s]: %q is reserved for the endpoints controller", discoveryv1.LabelManagedBy, ControllerName)
	}
	if s.Labels[discoveryv1.LabelServiceName] == "" {
		return fmt.Errorf("metadata.labels[%s] is required: without it no proxy uses the slice", discoveryv1.LabelServiceName)
	}
	if s.AddressType != discoveryv1.AddressTypeIPv4 {
		return fmt.Errorf("addressType %q: only IPv4 is supported", s.AddressType)
	}
	if o, ok := t.c.objs[KindEndpointSlice][objKey{s.Namespace, s.Name}]; ok && isManaged(o.GetLabels()) {
		return fmt.Errorf("the name is taken by a slice of the endpoints controller")
	}
	t.put(KindEndpointSlice, s)
	return nil
}

// syncEndpoints recomputes the EndpointSlices of every dirty Service, in name order.
func (t *tx) syncEndpoints() {
	keys := make([]objKey, 0, len(t.dirty))
	for k := range t.dirty {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b objKey) int {
		if c := strings.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, k := range keys {
		t.syncService(k)
	}
	clear(t.dirty)
}

// managesEndpoints reports whether the controller keeps slices for svc.
func managesEndpoints(svc *corev1.Service) bool {
	return svc != nil && len(svc.Spec.Selector) > 0 && svc.Spec.Type != corev1.ServiceTypeExternalName
}

// endpointGroup is the desired endpoints of one set of resolved ports.
type endpointGroup struct {
	ports []discoveryv1.EndpointPort
	eps   map[string]discoveryv1.Endpoint // by pod name
	order []string                        // pod names, sorted
}

// portsKey identifies a resolved port set.
func portsKey(ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "%s/%s/%d;", deref(p.Name), deref(p.Protocol), deref(p.Port))
	}
	return b.String()
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// resolvePorts returns the endpoint ports of pod for svc: a numeric targetPort as is, a
// named one looked up among the pod's container ports by name and protocol (ports the pod
// lacks are left out), like the controller's getEndpointPorts.
func resolvePorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		num, ok := findPort(pod, sp)
		if !ok {
			continue
		}
		name, proto, port := sp.Name, sp.Protocol, num
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		ep := discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port}
		if sp.AppProtocol != nil {
			ap := *sp.AppProtocol
			ep.AppProtocol = &ap
		}
		out = append(out, ep)
	}
	return out
}

// findPort resolves a service port's targetPort against a pod (podutil.FindPort).
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.String && tp.StrVal != "":
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				cpProto := cp.Protocol
				if cpProto == "" {
					cpProto = corev1.ProtocolTCP
				}
				if cp.Name == tp.StrVal && cpProto == proto {
					return cp.ContainerPort, true
				}
			}
		}
		return 0, false
	case tp.Type == intstr.Int && tp.IntVal != 0:
		return tp.IntVal, true
	default: // unset: the API default is the service port
		return sp.Port, true
	}
}

// podToEndpoint is the controller's podToEndpoint.
func (t *tx) podToEndpoint(svc *corev1.Service, pod *corev1.Pod, ip string) discoveryv1.Endpoint {
	serving := PodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef: &corev1.ObjectReference{
			Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		},
	}
	if pod.Spec.NodeName != "" {
		node := pod.Spec.NodeName
		ep.NodeName = &node
		if i, ok := t.c.nodeIndex[node]; ok && t.c.cfg.Nodes[i].Zone != "" {
			zone := t.c.cfg.Nodes[i].Zone
			ep.Zone = &zone
		}
	}
	return ep
}

// desiredGroups computes the endpoints a Service should have, grouped by port set.
func (t *tx) desiredGroups(svc *corev1.Service) map[string]*endpointGroup {
	c := t.c
	groups := map[string]*endpointGroup{}
	for name := range c.podIdx.candidates(svc.Namespace, svc.Spec.Selector) {
		pod := c.objs[KindPod][objKey{svc.Namespace, name}].(*corev1.Pod)
		if !matches(svc.Spec.Selector, pod.Labels) {
			continue
		}
		ip, ok := podIP(pod)
		if !ok || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		ports := resolvePorts(svc, pod)
		k := portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &endpointGroup{ports: ports, eps: map[string]discoveryv1.Endpoint{}}
			groups[k] = g
		}
		g.eps[name] = t.podToEndpoint(svc, pod, ip.String())
		g.order = append(g.order, name)
	}
	for _, g := range groups {
		slices.Sort(g.order)
	}
	return groups
}

// sliceLabels returns the labels of a Service's managed slices: the Service's own labels
// plus the controller's.
func sliceLabels(svc *corev1.Service) map[string]string {
	l := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		l[k] = v
	}
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = ControllerName
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		l[LabelHeadless] = ""
	} else {
		delete(l, LabelHeadless)
	}
	return l
}

// syncService reconciles one Service's managed EndpointSlices, changing as few slices as it
// can like the controller's reconciler: endpoints stay in the slice they are in, new
// endpoints fill the changed slices first, then slices with room, then new slices of at
// most MaxEndpointsPerSlice; a slice left empty is reused for a new one (update rather than
// delete and create) or deleted. A Service without endpoints keeps one placeholder slice
// with no ports. Every written slice carries the
// endpoints.kubernetes.io/last-change-trigger-time of this change.
func (t *tx) syncService(key objKey) {
	c := t.c
	var svc *corev1.Service
	if o, ok := c.objs[KindService][key]; ok {
		svc = o.(*corev1.Service)
	}
	names := make([]string, 0, len(c.svcSlices[key]))
	for n := range c.svcSlices[key] {
		names = append(names, n)
	}
	slices.Sort(names)
	existingAll := make([]*discoveryv1.EndpointSlice, 0, len(names))
	for _, n := range names {
		existingAll = append(existingAll, c.objs[KindEndpointSlice][objKey{key.ns, n}].(*discoveryv1.EndpointSlice))
	}
	if !managesEndpoints(svc) {
		for _, s := range existingAll {
			t.remove(KindEndpointSlice, objKey{key.ns, s.Name})
		}
		return
	}
	groups := t.desiredGroups(svc)
	labels := sliceLabels(svc)
	if len(groups) == 0 {
		// Placeholder: keep the first slice, emptied; delete the others.
		ps := &pendingSlice{}
		for i, s := range existingAll {
			if i == 0 {
				ps.old = s
				ps.changed = len(s.Endpoints) > 0 || len(s.Ports) > 0 || !reflect.DeepEqual(s.Labels, labels)
				continue
			}
			t.remove(KindEndpointSlice, objKey{key.ns, s.Name})
		}
		if ps.old == nil || ps.changed {
			t.writeSlice(svc, labels, ps)
		}
		return
	}
	existing := map[string][]*discoveryv1.EndpointSlice{}
	var unused []*discoveryv1.EndpointSlice
	for _, s := range existingAll {
		k := portsKey(s.Ports)
		if groups[k] == nil {
			unused = append(unused, s)
			continue
		}
		existing[k] = append(existing[k], s)
	}
	gkeys := make([]string, 0, len(groups))
	for k := range groups {
		gkeys = append(gkeys, k)
	}
	slices.Sort(gkeys)
	var writes []*pendingSlice
	for _, k := range gkeys {
		w, u := reconcileGroup(labels, groups[k], existing[k])
		writes = append(writes, w...)
		unused = append(unused, u...)
	}
	// New slices take the names of slices that would be deleted.
	for _, ps := range writes {
		if ps.old == nil && len(unused) > 0 {
			ps.old, unused = unused[0], unused[1:]
		}
		t.writeSlice(svc, labels, ps)
	}
	for _, s := range unused {
		t.remove(KindEndpointSlice, objKey{key.ns, s.Name})
	}
}

// pendingSlice is a slice being rebuilt.
type pendingSlice struct {
	old     *discoveryv1.EndpointSlice // the slice it replaces; nil for a new slice
	ports   []discoveryv1.EndpointPort
	eps     []discoveryv1.Endpoint
	changed bool
}

// reconcileGroup returns the slices of one port set to write (changed or new) and the
// existing ones left empty.
func reconcileGroup(labels map[string]string, g *endpointGroup, existing []*discoveryv1.EndpointSlice) (writes []*pendingSlice, unused []*discoveryv1.EndpointSlice) {
	placed := map[string]bool{}
	var work []*pendingSlice
	for _, s := range existing {
		ps := &pendingSlice{old: s, ports: g.ports, changed: !reflect.DeepEqual(s.Labels, labels)}
		for _, ep := range s.Endpoints {
			name := ""
			if ep.TargetRef != nil {
				name = ep.TargetRef.Name
			}
			want, ok := g.eps[name]
			if !ok || placed[name] {
				ps.changed = true
				continue
			}
			placed[name] = true
			if !reflect.DeepEqual(ep, want) {
				ps.changed = true
			}
			ps.eps = append(ps.eps, want)
		}
		work = append(work, ps)
	}
	var fresh []discoveryv1.Endpoint
	for _, name := range g.order {
		if !placed[name] {
			fresh = append(fresh, g.eps[name])
		}
	}
	// Fill changed slices with room first, then unchanged ones, then new slices.
	for _, wantChanged := range []bool{true, false} {
		for _, ps := range work {
			if ps.changed != wantChanged || len(ps.eps) == 0 {
				continue
			}
			for len(fresh) > 0 && len(ps.eps) < MaxEndpointsPerSlice {
				ps.eps = append(ps.eps, fresh[0])
				fresh = fresh[1:]
				ps.changed = true
			}
		}
	}
	for len(fresh) > 0 {
		n := min(len(fresh), MaxEndpointsPerSlice)
		work = append(work, &pendingSlice{ports: g.ports, eps: fresh[:n:n], changed: true})
		fresh = fresh[n:]
	}
	for _, ps := range work {
		switch {
		case len(ps.eps) == 0:
			unused = append(unused, ps.old)
		case ps.changed:
			writes = append(writes, ps)
		}
	}
	return writes, unused
}

// writeSlice stores the new version of a slice (or a new slice).
func (t *tx) writeSlice(svc *corev1.Service, labels map[string]string, ps *pendingSlice) {
	var s *discoveryv1.EndpointSlice
	if ps.old != nil {
		s = ps.old.DeepCopy()
	} else {
		s = &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: t.sliceName(svc), Namespace: svc.Namespace},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		ctrl, block := true, true
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name,
			UID: svc.UID, Controller: &ctrl, BlockOwnerDeletion: &block}}
	}
	s.Labels = make(map[string]string, len(labels))
	for k, v := range labels {
		s.Labels[k] = v
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[corev1.EndpointsLastChangeTriggerTime] = t.now.UTC().Format(time.RFC3339Nano)
	s.Endpoints = slices.Clone(ps.eps)
	s.Ports = slices.Clone(ps.ports)
	t.put(KindEndpointSlice, s)
}

// sliceName generates "<service>-<5 characters>", unique in the namespace.
func (t *tx) sliceName(svc *corev1.Service) string {
	c := t.c
	for {
		c.cnt.names++
		name := generatedName(svc.Name+"-", svc.Namespace+"/"+svc.Name+"/"+strconv.FormatUint(c.cnt.names, 10))
		if _, taken := c.objs[KindEndpointSlice][objKey{svc.Namespace, name}]; !taken {
			return name
		}
	}
}
