package apistore

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fixedTime is the test clock's start.
var fixedTime = time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)

// stepClock returns a clock advancing one millisecond per call, so every change has a
// distinct, predictable time.
func stepClock() func() time.Time {
	n := 0
	return func() time.Time {
		n++
		return fixedTime.Add(time.Duration(n) * time.Millisecond)
	}
}

func newCluster(t testing.TB, nodes int, mods ...func(*Config)) *Store {
	t.Helper()
	cfg := Config{Clock: stepClock()}
	for i := range nodes {
		cfg.Nodes = append(cfg.Nodes, Node{Name: fmt.Sprintf("node-%d", i+1),
			IP: netip.AddrFrom4([4]byte{192, 168, 0, byte(10 + i)}), Zone: fmt.Sprintf("zone-%c", 'a'+i)})
	}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	return c
}

type svcOpt func(*corev1.Service)

func newSvc(name string, opts ...svcOpt) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func withType(t corev1.ServiceType) svcOpt { return func(s *corev1.Service) { s.Spec.Type = t } }
func withClusterIP(ip string) svcOpt       { return func(s *corev1.Service) { s.Spec.ClusterIP = ip } }
func withNodePort(p int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = p
	}
}
func withPorts(ports ...corev1.ServicePort) svcOpt {
	return func(s *corev1.Service) { s.Spec.Ports = slices.Clone(ports) }
}
func withLocal() svcOpt {
	return func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
}
func withSelector(sel map[string]string) svcOpt {
	return func(s *corev1.Service) { s.Spec.Selector = sel }
}

func newPod(name string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "echo", Ports: ports}}},
	}
}

func newDeployment(name string, replicas int32, labels map[string]string, ports ...corev1.ContainerPort) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "echo",
					Ports: ports}}},
			},
		},
	}
}

// runPods plays the kubelet: every pod without an IP gets the next address of 10.244.0.0/16
// and becomes ready. It returns the names it started.
func runPods(t testing.TB, c *Store) []string {
	t.Helper()
	var started []string
	used := map[string]bool{}
	for _, p := range c.Pods() {
		used[p.Status.PodIP] = true
	}
	next := netip.MustParseAddr("10.244.0.1")
	for _, p := range c.Pods() {
		if p.Status.PodIP != "" {
			continue
		}
		for used[next.String()] {
			next = next.Next()
		}
		used[next.String()] = true
		require.NoError(t, c.SetPodStatus(p.Namespace, p.Name, PodStatus{IP: next, Ready: true}))
		started = append(started, p.Name)
	}
	return started
}

// slicesOf returns the managed slices of a service.
func slicesOf(c *Store, name string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, s := range c.EndpointSlices() {
		if s.Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, s)
		}
	}
	return out
}

// epState is an endpoint in a comparable form.
type epState struct {
	Pod, IP, Node, Zone         string
	Ready, Serving, Terminating bool
	Ports                       string // "name/proto/port;..." of its slice
}

func endpointsOf(c *Store, name string) []epState {
	var out []epState
	for _, s := range slicesOf(c, name) {
		for _, e := range s.Endpoints {
			out = append(out, epState{Pod: e.TargetRef.Name, IP: e.Addresses[0], Node: deref(e.NodeName),
				Zone: deref(e.Zone), Ready: *e.Conditions.Ready, Serving: *e.Conditions.Serving,
				Terminating: *e.Conditions.Terminating, Ports: portsKey(s.Ports)})
		}
	}
	return out
}

func getService(t testing.TB, c *Store, name string) *corev1.Service {
	t.Helper()
	o, err := c.Get(KindService, "default", name)
	require.NoError(t, err)
	return o.(*corev1.Service)
}
