// Package synth generates synthetic Services for scale and churn runs: selector-less
// Services with their own EndpointSlices pointing at existing lab pods (shared between
// services, so traffic through any of them reaches a real echo server).
package synth

import (
	"cmp"
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Namespace holds every synthetic Service.
const Namespace = "kpbench"

// Backend is an endpoint a synthetic Service may point at.
type Backend struct {
	IP   netip.Addr
	Node string
	// Pod is the pod's name as it answers probes ("" when the caller has none).
	Pod string
}

// Template shapes each synthetic Service.
type Template struct {
	// Port is the service port (default 80); TargetPort where the pods listen (default 8080).
	Port, TargetPort int32
	// Protocol (default TCP).
	Protocol corev1.Protocol
	// Type (default ClusterIP); NodePort gets an allocated node port.
	Type corev1.ServiceType
	// EndpointsPerService (default 2).
	EndpointsPerService int
	// AffinityClientIP sets sessionAffinity: ClientIP.
	AffinityClientIP bool
}

func (t *Template) defaults() {
	t.Port = cmp.Or(t.Port, 80)
	t.TargetPort = cmp.Or(t.TargetPort, 8080)
	t.Protocol = cmp.Or(t.Protocol, corev1.ProtocolTCP)
	t.Type = cmp.Or(t.Type, corev1.ServiceTypeClusterIP)
	t.EndpointsPerService = cmp.Or(t.EndpointsPerService, 2)
}

// Name returns the name of synthetic service i: svc-000042. Zero padding keeps name order
// equal to index order, which is the order of rules in iptables' KUBE-SERVICES.
func Name(i int) string { return fmt.Sprintf("svc-%06d", i) }

// Services returns Services [from, to) and one EndpointSlice each. Service i's endpoints
// are backends i, i+1, ... (mod len(backends)), so every backend is used evenly.
func Services(from, to int, t Template, backends []Backend) ([]runtime.Object, error) {
	t.defaults()
	if len(backends) < t.EndpointsPerService {
		return nil, fmt.Errorf("synthetic services: %d endpoints per service need at least that many pods, have %d", t.EndpointsPerService, len(backends))
	}
	objs := make([]runtime.Object, 0, 2*(to-from))
	for i := from; i < to; i++ {
		objs = append(objs, Service(i, t), Slice(i, 0, t, backends))
	}
	return objs, nil
}

// Service returns synthetic Service i.
func Service(i int, t Template) *corev1.Service {
	t.defaults()
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: Name(i), Namespace: Namespace},
		Spec: corev1.ServiceSpec{
			Type:            t.Type,
			Ports:           []corev1.ServicePort{{Port: t.Port, TargetPort: intstr.FromInt32(t.TargetPort), Protocol: t.Protocol}},
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	if t.AffinityClientIP {
		timeout := int32(10800)
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
	}
	if t.Type == corev1.ServiceTypeNodePort || t.Type == corev1.ServiceTypeLoadBalancer {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	internal := corev1.ServiceInternalTrafficPolicyCluster
	svc.Spec.InternalTrafficPolicy = &internal
	return svc
}

// Slice returns the EndpointSlice of synthetic Service i, its endpoints shifted by
// generation (a churn step bumps generation to move a service to other pods).
func Slice(i, generation int, t Template, backends []Backend) *discoveryv1.EndpointSlice {
	t.defaults()
	ready := true
	port, proto, portName := t.TargetPort, t.Protocol, ""
	sl := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(i) + "-synth", Namespace: Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: Name(i),
				discoveryv1.LabelManagedBy:   "kpbench-synth",
				"kpbench.dev/generation":     strconv.Itoa(generation),
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for k := range t.EndpointsPerService {
		b := backends[(i+generation+k)%len(backends)]
		node := b.Node
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{b.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: new(bool)},
			NodeName:   &node,
		})
	}
	return sl
}
