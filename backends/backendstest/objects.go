package backendstest

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TriggerTimeAnnotation is the EndpointSlice annotation of the change's time (as
// backends/agent.TriggerTimeAnnotation).
const TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// splitName splits "namespace/name" ("default" when there is no slash).
func splitName(nsName string) (string, string) {
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok {
		return "default", nsName
	}
	return ns, name
}

// TCPPort is a Service port of protocol TCP.
func TCPPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

// ServiceObject returns a ClusterIP Service "namespace/name" (or "name" in default) with
// ports.
func ServiceObject(nsName, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
	ns, name := splitName(nsName)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: clusterIP, Ports: ports},
	}
}

// SliceObject returns an IPv4 EndpointSlice "namespace/name" of service, with one TCP
// port and one endpoint (no conditions: ready, as the API reads them) per IP, and the
// trigger annotation when trigger is not zero.
func SliceObject(nsName, service, portName string, port int32, trigger time.Time, ips ...string) *discoveryv1.EndpointSlice {
	ns, name := splitName(nsName)
	proto := corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	if !trigger.IsZero() {
		s.Annotations = map[string]string{TriggerTimeAnnotation: trigger.Format(time.RFC3339Nano)}
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return s
}
