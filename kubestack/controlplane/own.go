package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// OwnServices returns the objects the API server makes by itself that a proxy programs:
// the default/kubernetes Service and its EndpointSlices, as the API server serves them
// minus server-set metadata, ready to be applied to a lab's store (which holds neither),
// so that a backend reading the store sees what kube-proxy reading the API server sees.
func (cp *ControlPlane) OwnServices(ctx context.Context) ([]runtime.Object, error) {
	client, err := cp.Client()
	if err != nil {
		return nil, err
	}
	svc, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the API server's default/kubernetes Service: %w", err)
	}
	list, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return nil, fmt.Errorf("list the EndpointSlices of default/kubernetes: %w", err)
	}
	svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	svc.ObjectMeta = userMeta(svc.ObjectMeta)
	svc.Status = corev1.ServiceStatus{}
	objs := []runtime.Object{svc}
	for i := range list.Items {
		s := &list.Items[i]
		s.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
		s.ObjectMeta = userMeta(s.ObjectMeta)
		objs = append(objs, s)
	}
	return objs, nil
}

// userMeta keeps what a manifest would say: name, namespace, labels and annotations.
func userMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations}
}
