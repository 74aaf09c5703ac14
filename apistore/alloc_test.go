package apistore

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestClusterIPAllocation(t *testing.T) {
	small := func(c *Config) { c.ServiceCIDR = mustPrefix("10.0.0.0/29") } // .1 reserved, .2-.6 free
	tests := []struct {
		name    string
		cfg     func(*Config)
		objs    []runtime.Object
		wantIPs map[string]string // service → clusterIP after Apply
		wantErr string
	}{
		{name: "first dynamic address skips the reserved .1",
			objs: []runtime.Object{newSvc("a"), newSvc("b")}, wantIPs: map[string]string{"a": "10.96.0.2", "b": "10.96.0.3"}},
		{name: "default/kubernetes gets .1",
			objs: []runtime.Object{newSvc("kubernetes"), newSvc("a")}, wantIPs: map[string]string{"kubernetes": "10.96.0.1", "a": "10.96.0.2"}},
		{name: "explicit address honoured", objs: []runtime.Object{newSvc("a", withClusterIP("10.100.0.10"))},
			wantIPs: map[string]string{"a": "10.100.0.10"}},
		{name: "explicit conflict", objs: []runtime.Object{newSvc("a", withClusterIP("10.96.0.10")), newSvc("b", withClusterIP("10.96.0.10"))},
			wantErr: "10.96.0.10 is already allocated"},
		{name: "outside the CIDR", objs: []runtime.Object{newSvc("a", withClusterIP("10.200.0.10"))},
			wantErr: "not in the range 10.96.0.0/12"},
		{name: "network address", objs: []runtime.Object{newSvc("a", withClusterIP("10.96.0.0"))},
			wantErr: "network or broadcast"},
		{name: "broadcast address", objs: []runtime.Object{newSvc("a", withClusterIP("10.111.255.255"))},
			wantErr: "network or broadcast"},
		{name: "reserved .1 refused to others", objs: []runtime.Object{newSvc("a", withClusterIP("10.96.0.1"))},
			wantErr: "reserved for the default/kubernetes service"},
		{name: "headless allocates nothing", objs: []runtime.Object{newSvc("h", withClusterIP("None")), newSvc("a")},
			wantIPs: map[string]string{"h": "None", "a": "10.96.0.2"}},
		{name: "ExternalName allocates nothing", objs: []runtime.Object{newSvc("x", withType(corev1.ServiceTypeExternalName)), newSvc("a")},
			wantIPs: map[string]string{"x": "", "a": "10.96.0.2"}},
		{name: "small CIDR: five services fit", cfg: small,
			objs:    []runtime.Object{newSvc("a"), newSvc("b"), newSvc("c"), newSvc("d"), newSvc("e")},
			wantIPs: map[string]string{"a": "10.0.0.2", "e": "10.0.0.6"}},
		{name: "small CIDR: the sixth is refused", cfg: small,
			objs:    []runtime.Object{newSvc("a"), newSvc("b"), newSvc("c"), newSvc("d"), newSvc("e"), newSvc("f")},
			wantErr: "no addresses left in 10.0.0.0/29"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mods []func(*Config)
			if tt.cfg != nil {
				mods = append(mods, tt.cfg)
			}
			c := newCluster(t, 1, mods...)
			err := c.Apply(t.Context(), tt.objs...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Empty(t, c.Services(), "a failed Apply stores nothing")
				return
			}
			require.NoError(t, err)
			for name, ip := range tt.wantIPs {
				s := getService(t, c, name)
				assert.Equal(t, ip, s.Spec.ClusterIP, name)
				if ip != "" {
					assert.Equal(t, []string{ip}, s.Spec.ClusterIPs, name)
				}
			}
		})
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestNodePortAllocation(t *testing.T) {
	tcpUDP := withPorts(
		corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
	)
	tests := []struct {
		name      string
		objs      []runtime.Object
		check     string  // service to check
		wantPorts []int32 // its node ports
		wantHC    int32
		wantErr   string
	}{
		{name: "dynamic from the bottom of the range",
			objs: []runtime.Object{newSvc("a", withType(corev1.ServiceTypeNodePort))}, check: "a", wantPorts: []int32{30000}},
		{name: "explicit honoured (nginx example)",
			objs: []runtime.Object{newSvc("a", withNodePort(30791))}, check: "a", wantPorts: []int32{30791}},
		{name: "conflict between services",
			objs:    []runtime.Object{newSvc("a", withNodePort(30791)), newSvc("b", withNodePort(30791))},
			wantErr: "port 30791 is already allocated"},
		{name: "conflict across protocols between services",
			objs: []runtime.Object{newSvc("a", withNodePort(30791)), newSvc("b", withNodePort(30791), func(s *corev1.Service) {
				s.Spec.Ports[0].Protocol = corev1.ProtocolUDP
			})},
			wantErr: "port 30791 is already allocated"},
		{name: "out of range", objs: []runtime.Object{newSvc("a", withNodePort(80))}, wantErr: "not in the range 30000-32767"},
		{name: "TCP and UDP of one port share a node port",
			objs: []runtime.Object{newSvc("a", withType(corev1.ServiceTypeNodePort), tcpUDP)}, check: "a", wantPorts: []int32{30000, 30000}},
		{name: "shared node port given on the second only",
			objs: []runtime.Object{newSvc("a", withType(corev1.ServiceTypeNodePort), tcpUDP, func(s *corev1.Service) {
				s.Spec.Ports[1].NodePort = 31053
			})}, check: "a", wantPorts: []int32{31053, 31053}},
		{name: "same node port twice for one protocol refused",
			objs: []runtime.Object{newSvc("a", withType(corev1.ServiceTypeNodePort), withPorts(
				corev1.ServicePort{Name: "a", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 31000},
				corev1.ServicePort{Name: "b", Port: 81, Protocol: corev1.ProtocolTCP, NodePort: 31000}))},
			wantErr: "already used by another port of this service"},
		{name: "node port on a ClusterIP service refused",
			objs: []runtime.Object{newSvc("a", withNodePort(30100), withType(corev1.ServiceTypeClusterIP))}, wantErr: "may not be used"},
		{name: "LoadBalancer Local gets a health-check node port",
			objs: []runtime.Object{newSvc("a", withType(corev1.ServiceTypeLoadBalancer), withLocal())}, check: "a",
			wantPorts: []int32{30000}, wantHC: 30001},
		{name: "NodePort Local gets none (API server rule)",
			objs: []runtime.Object{newSvc("a", withType(corev1.ServiceTypeNodePort), withLocal())}, check: "a",
			wantPorts: []int32{30000}, wantHC: 0},
		{name: "LoadBalancer without node ports",
			objs: []runtime.Object{newSvc("a", withType(corev1.ServiceTypeLoadBalancer), func(s *corev1.Service) {
				f := false
				s.Spec.AllocateLoadBalancerNodePorts = &f
			})}, check: "a", wantPorts: []int32{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 1)
			err := c.Apply(t.Context(), tt.objs...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Empty(t, c.Services())
				return
			}
			require.NoError(t, err)
			s := getService(t, c, tt.check)
			var got []int32
			for _, p := range s.Spec.Ports {
				got = append(got, p.NodePort)
			}
			assert.Equal(t, tt.wantPorts, got)
			assert.Equal(t, tt.wantHC, s.Spec.HealthCheckNodePort)
		})
	}
}

func TestNodePortExhaustion(t *testing.T) {
	c := newCluster(t, 1, func(c *Config) { c.NodePortMin, c.NodePortMax = 31000, 31002 })
	require.NoError(t, c.Apply(t.Context(), newSvc("a", withType(corev1.ServiceTypeNodePort)),
		newSvc("b", withType(corev1.ServiceTypeNodePort)), newSvc("c", withType(corev1.ServiceTypeNodePort))))
	err := c.Apply(t.Context(), newSvc("d", withType(corev1.ServiceTypeNodePort)))
	require.ErrorContains(t, err, "no ports left in 31000-31002")
	require.NoError(t, c.Delete(t.Context(), KindService, "default", "b"))
	require.NoError(t, c.Apply(t.Context(), newSvc("d", withType(corev1.ServiceTypeNodePort))))
	assert.Equal(t, int32(31001), getService(t, c, "d").Spec.Ports[0].NodePort, "the released port is reused")
}

func TestLoadBalancerIngress(t *testing.T) {
	c := newCluster(t, 1, func(c *Config) { c.LoadBalancerPool = mustPrefix("172.18.1.0/30") })
	lb := withType(corev1.ServiceTypeLoadBalancer)
	require.NoError(t, c.Apply(t.Context(), newSvc("a", lb)))
	s := getService(t, c, "a")
	require.Len(t, s.Status.LoadBalancer.Ingress, 1)
	assert.Equal(t, "172.18.1.1", s.Status.LoadBalancer.Ingress[0].IP)
	assert.Equal(t, corev1.LoadBalancerIPModeVIP, *s.Status.LoadBalancer.Ingress[0].IPMode)

	require.NoError(t, c.Apply(t.Context(), newSvc("b", lb)))
	require.ErrorContains(t, c.Apply(t.Context(), newSvc("c", lb)), "no addresses left in 172.18.1.0/30")

	// Re-applying keeps the ingress IP; changing the type away releases it.
	require.NoError(t, c.Apply(t.Context(), newSvc("a", lb)))
	assert.Equal(t, "172.18.1.1", getService(t, c, "a").Status.LoadBalancer.Ingress[0].IP)
	require.NoError(t, c.Apply(t.Context(), newSvc("a")))
	s = getService(t, c, "a")
	assert.Empty(t, s.Status.LoadBalancer.Ingress)
	assert.Zero(t, s.Spec.Ports[0].NodePort, "node ports released when the type becomes ClusterIP")
	require.NoError(t, c.Apply(t.Context(), newSvc("c", lb)))
	assert.Equal(t, "172.18.1.1", getService(t, c, "c").Status.LoadBalancer.Ingress[0].IP)
}

func TestUpdateKeepsAllocations(t *testing.T) {
	c := newCluster(t, 1)
	lbLocal := []svcOpt{withType(corev1.ServiceTypeLoadBalancer), withLocal()}
	require.NoError(t, c.Apply(t.Context(), newSvc("a", lbLocal...)))
	before := getService(t, c, "a")

	// The user's manifest again, without the allocated fields: everything is kept.
	require.NoError(t, c.Apply(t.Context(), newSvc("a", lbLocal...)))
	after := getService(t, c, "a")
	assert.Equal(t, before.Spec.ClusterIP, after.Spec.ClusterIP)
	assert.Equal(t, before.Spec.Ports[0].NodePort, after.Spec.Ports[0].NodePort)
	assert.Equal(t, before.Spec.HealthCheckNodePort, after.Spec.HealthCheckNodePort)
	assert.Equal(t, before.Status.LoadBalancer, after.Status.LoadBalancer)
	assert.Equal(t, before.UID, after.UID)
	assert.Equal(t, before.CreationTimestamp, after.CreationTimestamp)
	assert.NotEqual(t, before.ResourceVersion, after.ResourceVersion)

	// A changed node port is honoured, the old one released.
	require.NoError(t, c.Apply(t.Context(), newSvc("a", append(lbLocal, func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 32000 })...)))
	assert.Equal(t, int32(32000), getService(t, c, "a").Spec.Ports[0].NodePort)
	require.NoError(t, c.Apply(t.Context(), newSvc("b", withNodePort(before.Spec.Ports[0].NodePort))), "old node port is free")

	// ClusterIP is immutable.
	require.ErrorContains(t, c.Apply(t.Context(), newSvc("a", append(lbLocal, withClusterIP("10.96.9.9"))...)), "immutable")

	// Cluster policy releases the health-check port.
	require.NoError(t, c.Apply(t.Context(), newSvc("a", withType(corev1.ServiceTypeLoadBalancer))))
	assert.Zero(t, getService(t, c, "a").Spec.HealthCheckNodePort)
	require.NoError(t, c.Apply(t.Context(), newSvc("c", withNodePort(before.Spec.HealthCheckNodePort))))

	// Delete releases the ClusterIP.
	ip := getService(t, c, "a").Spec.ClusterIP
	require.NoError(t, c.Delete(t.Context(), KindService, "default", "a"))
	require.NoError(t, c.Apply(t.Context(), newSvc("d", withClusterIP(ip))))
}

func TestApplyAllOrNothing(t *testing.T) {
	c := newCluster(t, 2)
	events, err := c.Watch(t.Context())
	require.NoError(t, err)
	require.Equal(t, Synced, (<-events).Type)
	require.NoError(t, c.Apply(t.Context(), newSvc("taken", withNodePort(30500))))
	rv := c.ResourceVersion()

	err = c.Apply(t.Context(),
		newSvc("web", withType(corev1.ServiceTypeLoadBalancer), withLocal()),
		newDeployment("web", 3, map[string]string{"app": "web"}),
		newSvc("clash", withNodePort(30500)),
	)
	require.ErrorContains(t, err, "apply object 2 (Service default/clash)")
	assert.Len(t, c.Services(), 1)
	assert.Empty(t, c.Deployments())
	assert.Empty(t, c.Pods())
	assert.Len(t, c.EndpointSlices(), 1, "only the slice of the first service")
	assert.Equal(t, rv, c.ResourceVersion())

	// Nothing stayed allocated: the same objects without the clash get what the first
	// attempt would have, and the pods' names are those of a fresh cluster.
	require.NoError(t, c.Apply(t.Context(), newSvc("web", withType(corev1.ServiceTypeLoadBalancer), withLocal()),
		newDeployment("web", 3, map[string]string{"app": "web"})))
	s := getService(t, c, "web")
	assert.Equal(t, "10.96.0.3", s.Spec.ClusterIP)
	assert.Equal(t, int32(30000), s.Spec.Ports[0].NodePort)
	assert.Equal(t, int32(30001), s.Spec.HealthCheckNodePort)
	assert.Equal(t, "172.18.1.1", s.Status.LoadBalancer.Ingress[0].IP)

	fresh := newCluster(t, 2)
	require.NoError(t, fresh.Apply(t.Context(), newDeployment("web", 3, map[string]string{"app": "web"})))
	assert.Equal(t, podNames(fresh), podNames(c))

	// The watcher saw the taken service, then the successful Apply, and nothing between.
	ev := <-events
	assert.Equal(t, "taken", ev.Name)
	ev = <-events // its slice
	assert.Equal(t, KindEndpointSlice, ev.Kind)
	ev = <-events
	assert.Equal(t, "web", ev.Name)
	assert.Equal(t, rv+1, ev.ResourceVersion)
}

func podNames(c *Store) []string {
	var out []string
	for _, p := range c.Pods() {
		out = append(out, p.Name)
	}
	return out
}
