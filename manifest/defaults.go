package manifest

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultNamespace is the namespace of objects that name none.
const DefaultNamespace = "default"

// DefaultClientIPTimeoutSeconds is the API server's default
// sessionAffinityConfig.clientIP.timeoutSeconds (3 hours).
const DefaultClientIPTimeoutSeconds int32 = 10800

// SetDefaults fills in what the API server would default when the object is created. It
// is idempotent.
//
//   - every kind: metadata.namespace "default";
//   - Service: type ClusterIP; ports[].protocol TCP and targetPort = port;
//     sessionAffinity None, and for ClientIP a timeout of 10800 s; externalTrafficPolicy
//     Cluster for externally-accessible Services (NodePort, LoadBalancer, or ClusterIP
//     with externalIPs, as the API server decides); internalTrafficPolicy Cluster (not for
//     ExternalName); allocateLoadBalancerNodePorts true for LoadBalancer;
//   - Pod and Deployment: container ports' protocol TCP; Deployment replicas 1;
//   - EndpointSlice: ports[].protocol TCP.
func SetDefaults(obj KubeObject) {
	if ns, ok := obj.(*corev1.Namespace); ok { // cluster-scoped
		ns.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: KindNamespace}
		return
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(DefaultNamespace)
	}
	switch o := obj.(type) {
	case *corev1.Service:
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: KindService}
		defaultService(o)
	case *corev1.Pod:
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: KindPod}
		defaultPodSpec(&o.Spec)
	case *appsv1.Deployment:
		o.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: KindDeployment}
		if o.Spec.Replicas == nil {
			one := int32(1)
			o.Spec.Replicas = &one
		}
		defaultPodSpec(&o.Spec.Template.Spec)
	case *discoveryv1.EndpointSlice:
		o.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: KindEndpointSlice}
		for i := range o.Ports {
			if o.Ports[i].Protocol == nil {
				tcp := corev1.ProtocolTCP
				o.Ports[i].Protocol = &tcp
			}
		}
	}
}

func defaultService(s *corev1.Service) {
	spec := &s.Spec
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if spec.SessionAffinityConfig == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP == nil {
			spec.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			t := DefaultClientIPTimeoutSeconds
			spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = &t
		}
	}
	if externallyAccessible(s) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.Type != corev1.ServiceTypeExternalName && spec.InternalTrafficPolicy == nil {
		c := corev1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &c
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
}

// externallyAccessible is the API server's rule for Services that may carry an
// externalTrafficPolicy: NodePort and LoadBalancer, and ClusterIP with externalIPs.
func externallyAccessible(s *corev1.Service) bool {
	switch s.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return true
	case corev1.ServiceTypeClusterIP:
		return len(s.Spec.ExternalIPs) > 0
	}
	return false
}

func defaultPodSpec(spec *corev1.PodSpec) {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for j := range cs[i].Ports {
				if cs[i].Ports[j].Protocol == "" {
					cs[i].Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	}
}
