package backends

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

// nginxService is the seed example's Service (examples/nginx-nodeport.yaml) as the API
// server stores it.
func nginxService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-service", Namespace: "default", Labels: map[string]string{"app": "nginx"}},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeNodePort,
			ClusterIP: "10.96.0.2",
			Selector:  map[string]string{"app": "nginx"},
			Ports: []corev1.ServicePort{{Port: 88, TargetPort: intstr.FromInt32(80), NodePort: 30791,
				Protocol: corev1.ProtocolTCP}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			SessionAffinity:       corev1.ServiceAffinityNone,
		},
	}
}

type ep struct {
	ip, node                    string
	ready, serving, terminating *bool
}

func slice(svc, name string, port *discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if port != nil {
		s.Ports = []discoveryv1.EndpointPort{*port}
	}
	for _, e := range eps {
		de := discoveryv1.Endpoint{Addresses: []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			de.NodeName = ptr(e.node)
			de.Zone = ptr("zone-" + e.node)
		}
		s.Endpoints = append(s.Endpoints, de)
	}
	return s
}

func tcpPort(name string, port int32) *discoveryv1.EndpointPort {
	return &discoveryv1.EndpointPort{Name: ptr(name), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}
}

var (
	yes = ptr(true)
	no  = ptr(false)
)

func TestBuildStateNginxExample(t *testing.T) {
	node := NodeView{Name: "node-1", IPs: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}
	sl := slice("nginx-service", "nginx-service-abcde", tcpPort("", 80),
		ep{ip: "10.244.2.5", node: "node-3", ready: yes, serving: yes, terminating: no},
		ep{ip: "10.244.0.5", node: "node-1", ready: yes, serving: yes, terminating: no},
		ep{ip: "10.244.1.5", node: "node-2", ready: yes, serving: yes, terminating: no})
	st := BuildState(node, ViewOptions{ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}},
		[]*corev1.Service{nginxService()}, []*discoveryv1.EndpointSlice{sl})
	want := &State{
		NodeName:     "node-1",
		NodeIPs:      node.IPs,
		ClusterCIDR:  netip.MustParsePrefix("10.244.0.0/16"),
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
		Services: []*ServicePort{{
			Name:      ServicePortName{Namespace: "default", Name: "nginx-service", Protocol: TCP},
			ClusterIP: netip.MustParseAddr("10.96.0.2"), Port: 88, NodePort: 30791,
			Endpoints: []Endpoint{
				{IP: netip.MustParseAddr("10.244.0.5"), Port: 80, NodeName: "node-1", Zone: "zone-node-1", Ready: true, Serving: true, IsLocal: true},
				{IP: netip.MustParseAddr("10.244.1.5"), Port: 80, NodeName: "node-2", Zone: "zone-node-2", Ready: true, Serving: true},
				{IP: netip.MustParseAddr("10.244.2.5"), Port: 80, NodeName: "node-3", Zone: "zone-node-3", Ready: true, Serving: true},
			},
		}},
	}
	assert.Equal(t, want, st)
}

func TestBuildStateServices(t *testing.T) {
	mod := func(f func(*corev1.Service)) *corev1.Service { s := nginxService(); f(s); return s }
	tests := []struct {
		name  string
		svc   *corev1.Service
		check func(t *testing.T, sps []*ServicePort)
	}{
		{"ExternalName skipped", mod(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ClusterIP = ""
		}), func(t *testing.T, sps []*ServicePort) { assert.Empty(t, sps) }},
		{"headless skipped", mod(func(s *corev1.Service) { s.Spec.ClusterIP = "None" }),
			func(t *testing.T, sps []*ServicePort) { assert.Empty(t, sps) }},
		// kube-proxy filters the headless label on EndpointSlices, not on Services (v1.37's
		// informers; the e2e "should implement service.kubernetes.io/headless" labels a slice).
		{"headless label on the Service: still proxied", mod(func(s *corev1.Service) { s.Labels[LabelHeadless] = "" }),
			func(t *testing.T, sps []*ServicePort) { assert.Len(t, sps, 1) }},
		{"service-proxy-name label skipped", mod(func(s *corev1.Service) { s.Labels[LabelServiceProxyName] = "other" }),
			func(t *testing.T, sps []*ServicePort) { assert.Empty(t, sps) }},
		{"affinity default timeout", mod(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }),
			func(t *testing.T, sps []*ServicePort) {
				assert.True(t, sps[0].AffinityClientIP)
				assert.Equal(t, int32(10800), sps[0].AffinityTimeoutSeconds)
			}},
		{"affinity explicit timeout", mod(func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
		}), func(t *testing.T, sps []*ServicePort) { assert.Equal(t, int32(60), sps[0].AffinityTimeoutSeconds) }},
		{"LoadBalancer Local: IPs, ranges, health check", mod(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32100
			s.Spec.ExternalIPs = []string{"203.0.113.7", "2001:db8::1"}
			s.Spec.LoadBalancerSourceRanges = []string{" 198.51.100.0/24", "10.0.0.1/8"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.1.1"},
				{IP: "172.18.1.2", IPMode: ptr(corev1.LoadBalancerIPModeProxy)}}
		}), func(t *testing.T, sps []*ServicePort) {
			sp := sps[0]
			assert.Equal(t, []netip.Addr{netip.MustParseAddr("203.0.113.7")}, sp.ExternalIPs)
			assert.Equal(t, []netip.Addr{netip.MustParseAddr("172.18.1.1")}, sp.LoadBalancerIPs)
			assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("10.0.0.0/8")},
				sp.LoadBalancerSourceRanges)
			assert.True(t, sp.ExternalPolicyLocal)
			assert.Equal(t, int32(32100), sp.HealthCheckNodePort)
		}},
		{"NodePort Local: policy but no health check port", mod(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32100
		}), func(t *testing.T, sps []*ServicePort) {
			assert.True(t, sps[0].ExternalPolicyLocal)
			assert.Zero(t, sps[0].HealthCheckNodePort)
		}},
		{"ClusterIP Local external policy is meaningless", mod(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.Ports[0].NodePort = 0
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
		}), func(t *testing.T, sps []*ServicePort) {
			assert.False(t, sps[0].ExternalPolicyLocal)
			assert.True(t, sps[0].InternalPolicyLocal)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := BuildState(NodeView{Name: "node-1"}, ViewOptions{}, []*corev1.Service{tt.svc}, nil)
			tt.check(t, st.Services)
		})
	}
}

func TestBuildStateEndpoints(t *testing.T) {
	svc := nginxService()
	svc.Spec.Ports = []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
	}
	udp := &discoveryv1.EndpointPort{Name: ptr("dns"), Port: ptr(int32(5353)), Protocol: ptr(corev1.ProtocolUDP)}
	type got struct {
		IP                                   string
		Port                                 int32
		Ready, Serving, Terminating, IsLocal bool
	}
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		port   string
		want   []got
	}{
		{name: "nil conditions: ready, serving, not terminating",
			slices: []*discoveryv1.EndpointSlice{slice("nginx-service", "a", tcpPort("http", 8080), ep{ip: "10.0.0.1"})},
			port:   "http", want: []got{{"10.0.0.1", 8080, true, true, false, false}}},
		{name: "explicit conditions",
			slices: []*discoveryv1.EndpointSlice{slice("nginx-service", "a", tcpPort("http", 8080),
				ep{ip: "10.0.0.2", node: "node-1", ready: no, serving: yes, terminating: yes},
				ep{ip: "10.0.0.1", node: "node-2", ready: no, serving: no, terminating: no})},
			port: "http", want: []got{{"10.0.0.1", 8080, false, false, false, false}, {"10.0.0.2", 8080, false, true, true, true}}},
		{name: "port matched by name and protocol, slices merged and deduplicated",
			slices: []*discoveryv1.EndpointSlice{
				slice("nginx-service", "b", udp, ep{ip: "10.0.0.3"}, ep{ip: "10.0.0.1"}),
				slice("nginx-service", "a", tcpPort("dns", 53), ep{ip: "10.0.0.9"}),
				slice("nginx-service", "c", udp, ep{ip: "10.0.0.1", ready: no}),
			},
			port: "dns", want: []got{{"10.0.0.1", 5353, true, true, false, false}, {"10.0.0.3", 5353, true, true, false, false}}},
		{name: "other services and address types ignored",
			slices: []*discoveryv1.EndpointSlice{
				slice("other", "a", tcpPort("http", 8080), ep{ip: "10.0.0.1"}),
				func() *discoveryv1.EndpointSlice {
					s := slice("nginx-service", "b", tcpPort("http", 8080), ep{ip: "fd00::1"})
					s.AddressType = discoveryv1.AddressTypeIPv6
					return s
				}(),
			},
			port: "http", want: nil},
		{name: "slice labelled headless ignored",
			slices: []*discoveryv1.EndpointSlice{
				slice("nginx-service", "a", tcpPort("http", 8080), ep{ip: "10.0.0.1"}),
				func() *discoveryv1.EndpointSlice {
					s := slice("nginx-service", "b", tcpPort("http", 8080), ep{ip: "10.0.0.2"})
					s.Labels[LabelHeadless] = ""
					return s
				}(),
			},
			port: "http", want: []got{{"10.0.0.1", 8080, true, true, false, false}}},
		{name: "placeholder slice gives no endpoints",
			slices: []*discoveryv1.EndpointSlice{slice("nginx-service", "a", nil)}, port: "http", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := BuildState(NodeView{Name: "node-1"}, ViewOptions{}, []*corev1.Service{svc}, tt.slices)
			require.Len(t, st.Services, 2)
			proto := TCP
			if tt.port == "dns" {
				proto = UDP
			}
			sp := st.Find(ServicePortName{Namespace: "default", Name: "nginx-service", Port: tt.port, Protocol: proto})
			require.NotNil(t, sp)
			var g []got
			for _, e := range sp.Endpoints {
				g = append(g, got{e.IP.String(), e.Port, e.Ready, e.Serving, e.Terminating, e.IsLocal})
			}
			assert.Equal(t, tt.want, g)
		})
	}
}

func TestBuildStateSortsServices(t *testing.T) {
	a, b := nginxService(), nginxService()
	a.Name, b.Name = "zz", "aa"
	b.Namespace = "kube-system"
	st := BuildState(NodeView{}, ViewOptions{MasqueradeAll: true}, []*corev1.Service{a, b}, nil)
	require.Len(t, st.Services, 2)
	assert.Equal(t, "default", st.Services[0].Name.Namespace)
	assert.Equal(t, "kube-system", st.Services[1].Name.Namespace)
	assert.True(t, st.MasqueradeAll)
}

// TestServicePortNameStrings: the seed's kube-proxy kept the colon of an unnamed port;
// v1.37 writes it only for a named one.
func TestServicePortNameStrings(t *testing.T) {
	tests := []struct {
		name           ServicePortName
		seed, upstream string
	}{
		{ServicePortName{Namespace: "default", Name: "web", Protocol: TCP}, "default/web:", "default/web"},
		{ServicePortName{Namespace: "default", Name: "kubernetes", Port: "https", Protocol: TCP}, "default/kubernetes:https", "default/kubernetes:https"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.seed, tt.name.String())
		assert.Equal(t, tt.upstream, tt.name.UpstreamString())
	}
}
