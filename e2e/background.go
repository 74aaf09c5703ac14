//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kpbench.dev/kpbench/kubestack"
)

// BackgroundNamespace holds the --background-services Services.
const BackgroundNamespace = "kpbench-background"

// backgroundBase starts the addresses of the background Services' endpoints: 198.18.0.0/15,
// the benchmarking range of RFC 2544, which no lab host has, so nothing ever answers there
// (nothing sends there either: the Services only make kube-proxy's rule set bigger).
const backgroundBase = 198<<24 | 18<<16

// backgroundParallel is how many API requests the background Services are made with at
// once.
const backgroundParallel = 16

// createBackground makes n Services in BackgroundNamespace, each with one TCP port and an
// EndpointSlice of two endpoints (selector-less, so that no controller touches them), the
// way kube-proxy's scale tests pad a cluster.
//
// Equivalent to: n times `kubectl create service clusterip bg-N --tcp 80` plus `kubectl
// apply` of its EndpointSlice.
func createBackground(ctx context.Context, st *kubestack.Stack, n int) error {
	rc, err := st.ControlPlane().RESTConfig()
	if err != nil {
		return fmt.Errorf("background services: %w", err)
	}
	rc.QPS, rc.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("background services: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: BackgroundNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("background services: namespace %s: %w", BackgroundNamespace, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(backgroundParallel)
	for i := range n {
		g.Go(func() error { return createBackgroundService(gctx, client, i) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("background services: %w", err)
	}
	return nil
}

// createBackgroundService makes the i-th background Service and its EndpointSlice.
func createBackgroundService(ctx context.Context, client kubernetes.Interface, i int) error {
	name := fmt.Sprintf("bg-%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: BackgroundNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80,
		}}},
	}
	if _, err := client.CoreV1().Services(BackgroundNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("background service %s: %w", name, err)
	}
	ready := true
	port, proto, portName := int32(8080), corev1.ProtocolTCP, "http"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: BackgroundNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: kubestack.ManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}
	for k := range 2 {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{backgroundAddr(2*i + k).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	if _, err := client.DiscoveryV1().EndpointSlices(BackgroundNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("EndpointSlice %s: %w", name, err)
	}
	return nil
}

// backgroundAddr is the k-th address after backgroundBase (2*MaxBackgroundServices of them
// fit in the /15).
func backgroundAddr(k int) netip.Addr {
	v := uint32(backgroundBase + k + 1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
