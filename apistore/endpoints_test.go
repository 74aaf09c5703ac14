package apistore

import (
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const httpPorts = "http/TCP/8080;"

func TestEndpointConditions(t *testing.T) {
	web := map[string]string{"app": "web"}
	ip := netip.MustParseAddr("10.244.0.7")
	tests := []struct {
		name   string
		svc    []svcOpt
		status []PodStatus // applied in order
		want   []epState   // nil: no endpoint
	}{
		{name: "pending pod without IP is skipped", want: nil},
		{name: "ready", status: []PodStatus{{IP: ip, Ready: true}},
			want: []epState{{Ready: true, Serving: true}}},
		{name: "running, not ready", status: []PodStatus{{IP: ip}},
			want: []epState{{}}},
		{name: "ready then not ready", status: []PodStatus{{IP: ip, Ready: true}, {IP: ip}},
			want: []epState{{}}},
		{name: "not ready then ready", status: []PodStatus{{IP: ip}, {IP: ip, Ready: true}},
			want: []epState{{Ready: true, Serving: true}}},
		{name: "terminating while ready: serving, not ready", status: []PodStatus{{IP: ip, Ready: true, Terminating: true}},
			want: []epState{{Serving: true, Terminating: true}}},
		{name: "terminating and not ready", status: []PodStatus{{IP: ip, Ready: true}, {IP: ip, Terminating: true}},
			want: []epState{{Terminating: true}}},
		{name: "terminating is sticky", status: []PodStatus{{IP: ip, Ready: true, Terminating: true}, {IP: ip, Ready: true}},
			want: []epState{{Serving: true, Terminating: true}}},
		{name: "publishNotReadyAddresses: not ready pod is ready",
			svc:    []svcOpt{func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }},
			status: []PodStatus{{IP: ip}}, want: []epState{{Ready: true}}},
		{name: "publishNotReadyAddresses: terminating pod is ready",
			svc:    []svcOpt{func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }},
			status: []PodStatus{{IP: ip, Ready: true, Terminating: true}}, want: []epState{{Ready: true, Serving: true, Terminating: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 2)
			require.NoError(t, c.Apply(t.Context(), newSvc("web", tt.svc...), newPod("p", web)))
			for _, st := range tt.status {
				require.NoError(t, c.SetPodStatus("default", "p", st))
			}
			var want []epState
			for _, w := range tt.want {
				w.Pod, w.IP, w.Node, w.Zone, w.Ports = "p", ip.String(), "node-1", "zone-a", httpPorts
				want = append(want, w)
			}
			assert.Equal(t, want, endpointsOf(c, "web"))
			ss := slicesOf(c, "web")
			require.Len(t, ss, 1, "one slice (a placeholder when empty)")
			if want == nil {
				assert.Empty(t, ss[0].Ports, "the placeholder has no ports")
			}
		})
	}
}

func TestEndpointSliceShape(t *testing.T) {
	c := newCluster(t, 3)
	svc := newSvc("web")
	svc.Labels = map[string]string{"team": "a"}
	require.NoError(t, c.Apply(t.Context(), svc, newDeployment("web", 3, map[string]string{"app": "web"})))
	runPods(t, c)
	ss := slicesOf(c, "web")
	require.Len(t, ss, 1)
	s := ss[0]
	assert.Regexp(t, regexp.MustCompile(`^web-[bcdfghjklmnpqrstvwxz2456789]{5}$`), s.Name)
	assert.Equal(t, map[string]string{"team": "a", discoveryv1.LabelServiceName: "web",
		discoveryv1.LabelManagedBy: ControllerName}, s.Labels)
	assert.Equal(t, discoveryv1.AddressTypeIPv4, s.AddressType)
	require.Len(t, s.OwnerReferences, 1)
	assert.Equal(t, "Service", s.OwnerReferences[0].Kind)
	assert.Equal(t, getService(t, c, "web").UID, s.OwnerReferences[0].UID)
	require.Len(t, s.Ports, 1)
	assert.Equal(t, "http", *s.Ports[0].Name)
	assert.Equal(t, int32(8080), *s.Ports[0].Port)
	assert.Equal(t, corev1.ProtocolTCP, *s.Ports[0].Protocol)
	nodes := map[string]string{}
	for _, e := range endpointsOf(c, "web") {
		nodes[e.Node] = e.Zone
	}
	assert.Equal(t, map[string]string{"node-1": "zone-a", "node-2": "zone-b", "node-3": "zone-c"}, nodes,
		"three replicas spread over three nodes, zones from the node config")
	trig, err := time.Parse(time.RFC3339Nano, s.Annotations[corev1.EndpointsLastChangeTriggerTime])
	require.NoError(t, err)
	p, err := c.Get(KindPod, "default", s.Endpoints[len(s.Endpoints)-1].TargetRef.Name)
	require.NoError(t, err)
	assert.True(t, trig.After(fixedTime))
	assert.False(t, trig.Before(p.(*corev1.Pod).Status.Conditions[len(p.(*corev1.Pod).Status.Conditions)-1].LastTransitionTime.Time),
		"trigger time is that of the last pod change")
}

func TestTriggerTimeOnlyOnChangedSlices(t *testing.T) {
	c := newCluster(t, 1)
	require.NoError(t, c.Apply(t.Context(), newSvc("web"), newDeployment("web", 150, map[string]string{"app": "web"})))
	runPods(t, c)
	before := map[string]string{}
	for _, s := range slicesOf(c, "web") {
		before[s.Name] = s.ResourceVersion
	}
	require.Len(t, before, 2)
	// One pod becomes unready: only its slice is rewritten.
	victim := slicesOf(c, "web")[1].Endpoints[0].TargetRef.Name
	require.NoError(t, c.SetPodStatus("default", victim, PodStatus{IP: mustPodIP(t, c, victim)}))
	changed := 0
	for _, s := range slicesOf(c, "web") {
		if s.ResourceVersion != before[s.Name] {
			changed++
		}
	}
	assert.Equal(t, 1, changed)
}

func mustPodIP(t *testing.T, c *Store, name string) netip.Addr {
	t.Helper()
	o, err := c.Get(KindPod, "default", name)
	require.NoError(t, err)
	return netip.MustParseAddr(o.(*corev1.Pod).Status.PodIP)
}

func TestSelectors(t *testing.T) {
	c := newCluster(t, 1)
	require.NoError(t, c.Apply(t.Context(),
		newSvc("web", withSelector(map[string]string{"app": "web", "tier": "front"})),
		newSvc("all-web", withSelector(map[string]string{"app": "web"})),
		newPod("front", map[string]string{"app": "web", "tier": "front"}),
		newPod("back", map[string]string{"app": "web", "tier": "back"}),
		newPod("other-ns", map[string]string{"app": "web", "tier": "front"}),
		newPod("db", map[string]string{"app": "db"}),
	))
	// Move "other-ns" into another namespace: apply a fresh one there and delete this one.
	require.NoError(t, c.Delete(t.Context(), KindPod, "default", "other-ns"))
	p := newPod("x", map[string]string{"app": "web", "tier": "front"})
	p.Namespace = "other"
	require.NoError(t, c.Apply(t.Context(), p))
	runPods(t, c)
	names := func(svc string) []string {
		var out []string
		for _, e := range endpointsOf(c, svc) {
			out = append(out, e.Pod)
		}
		return out
	}
	assert.Equal(t, []string{"front"}, names("web"))
	assert.ElementsMatch(t, []string{"front", "back"}, names("all-web"))

	// Relabelling a pod moves it between services.
	relabelled := newPod("back", map[string]string{"app": "web", "tier": "front"})
	require.NoError(t, c.Apply(t.Context(), relabelled))
	assert.ElementsMatch(t, []string{"front", "back"}, names("web"))
	// The pod's status survives the update.
	assert.Len(t, endpointsOf(c, "web"), 2)
	// Changing the service's selector re-selects.
	require.NoError(t, c.Apply(t.Context(), newSvc("web", withSelector(map[string]string{"app": "db"}))))
	assert.Equal(t, []string{"db"}, names("web"))
	// Deleting a pod removes its endpoint.
	require.NoError(t, c.Delete(t.Context(), KindPod, "default", "db"))
	assert.Empty(t, names("web"))
}

func TestSliceSplitting(t *testing.T) {
	c := newCluster(t, 2)
	require.NoError(t, c.Apply(t.Context(), newSvc("big"), newDeployment("big", 250, map[string]string{"app": "big"})))
	runPods(t, c)
	sizes := func() []int {
		var out []int
		for _, s := range slicesOf(c, "big") {
			out = append(out, len(s.Endpoints))
		}
		return out
	}
	assert.ElementsMatch(t, []int{100, 100, 50}, sizes())
	assert.Len(t, endpointsOf(c, "big"), 250)
	seen := map[string]bool{}
	for _, e := range endpointsOf(c, "big") {
		assert.False(t, seen[e.IP], "endpoint %s appears once", e.IP)
		seen[e.IP] = true
	}
	require.NoError(t, c.ScaleDeployment("default", "big", 120))
	total := 0
	for _, n := range sizes() {
		assert.LessOrEqual(t, n, MaxEndpointsPerSlice)
		assert.Positive(t, n, "no empty slices left behind")
		total += n
	}
	assert.Equal(t, 120, total)
	require.NoError(t, c.ScaleDeployment("default", "big", 0))
	assert.Equal(t, []int{0}, sizes(), "a placeholder remains")
}

func TestNamedPorts(t *testing.T) {
	c := newCluster(t, 1)
	svc := newSvc("web", withPorts(
		corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")},
		corev1.ServicePort{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("metrics")},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("web")},
	))
	web := map[string]string{"app": "web"}
	require.NoError(t, c.Apply(t.Context(), svc,
		newPod("a", web, corev1.ContainerPort{Name: "web", ContainerPort: 8080}, corev1.ContainerPort{Name: "metrics", ContainerPort: 9100}),
		newPod("b", web, corev1.ContainerPort{Name: "web", ContainerPort: 8081}, corev1.ContainerPort{Name: "metrics", ContainerPort: 9100}),
		// c serves web over UDP too, and no metrics.
		newPod("c", web, corev1.ContainerPort{Name: "web", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
			corev1.ContainerPort{Name: "web", ContainerPort: 8080}),
	))
	runPods(t, c)
	byPod := map[string]string{}
	for _, e := range endpointsOf(c, "web") {
		byPod[e.Pod] = e.Ports
	}
	assert.Equal(t, map[string]string{
		"a": "http/TCP/8080;metrics/TCP/9100;",
		"b": "http/TCP/8081;metrics/TCP/9100;",
		"c": "http/TCP/8080;dns/UDP/5353;",
	}, byPod, "one slice per resolved port set")
	assert.Len(t, slicesOf(c, "web"), 3)
}

func TestHeadlessAndExternalName(t *testing.T) {
	c := newCluster(t, 1)
	require.NoError(t, c.Apply(t.Context(),
		newSvc("web", withClusterIP("None")),
		newSvc("ext", withType(corev1.ServiceTypeExternalName), withSelector(map[string]string{"app": "web"}),
			func(s *corev1.Service) { s.Spec.ExternalName = "example.com" }),
		newPod("p", map[string]string{"app": "web"}),
	))
	runPods(t, c)
	ss := slicesOf(c, "web")
	require.Len(t, ss, 1, "headless services get EndpointSlices")
	assert.Contains(t, ss[0].Labels, LabelHeadless)
	assert.Len(t, ss[0].Endpoints, 1)
	assert.Empty(t, slicesOf(c, "ext"), "ExternalName services get none")
}

func TestSelectorlessServiceKeepsUserSlices(t *testing.T) {
	c := newCluster(t, 1)
	ready := true
	port, name, proto := int32(9376), "http", corev1.ProtocolTCP
	user := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "manual-1", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "manual", discoveryv1.LabelManagedBy: "staff"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	require.NoError(t, c.Apply(t.Context(), newSvc("manual", withSelector(nil)), user))
	require.NoError(t, c.Apply(t.Context(), newPod("p", map[string]string{"app": "manual"})))
	runPods(t, c)
	all := c.EndpointSlices()
	require.Len(t, all, 1)
	assert.Equal(t, "manual-1", all[0].Name)
	assert.Equal(t, user.Endpoints, all[0].Endpoints)
	assert.NotEmpty(t, all[0].UID)

	for _, tt := range []struct {
		name    string
		mod     func(*discoveryv1.EndpointSlice)
		wantErr string
	}{
		{"no service-name label", func(s *discoveryv1.EndpointSlice) { delete(s.Labels, discoveryv1.LabelServiceName) }, "is required"},
		{"controller's managed-by", func(s *discoveryv1.EndpointSlice) { s.Labels[discoveryv1.LabelManagedBy] = ControllerName }, "reserved"},
		{"IPv6", func(s *discoveryv1.EndpointSlice) { s.AddressType = discoveryv1.AddressTypeIPv6 }, "only IPv4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := user.DeepCopy()
			s.Name = "bad"
			tt.mod(s)
			require.ErrorContains(t, c.Apply(t.Context(), s), tt.wantErr)
		})
	}
}

func TestServiceDeleteRemovesSlices(t *testing.T) {
	c := newCluster(t, 1)
	require.NoError(t, c.Apply(t.Context(), newSvc("web"), newPod("p", map[string]string{"app": "web"})))
	runPods(t, c)
	require.Len(t, slicesOf(c, "web"), 1)
	old := slicesOf(c, "web")[0].Name
	// A deleted managed slice is recreated.
	require.NoError(t, c.Delete(t.Context(), KindEndpointSlice, "default", old))
	require.Len(t, slicesOf(c, "web"), 1)
	assert.NotEqual(t, old, slicesOf(c, "web")[0].Name)
	require.NoError(t, c.Delete(t.Context(), KindService, "default", "web"))
	assert.Empty(t, c.EndpointSlices())
	require.ErrorIs(t, c.Delete(t.Context(), KindService, "default", "web"), ErrNotFound)
}

func TestDeploymentPods(t *testing.T) {
	nginx := map[string]string{"app": "nginx"}
	c := newCluster(t, 3)
	require.NoError(t, c.Apply(t.Context(), newDeployment("nginx-deployment", 3, nginx, corev1.ContainerPort{ContainerPort: 80})))
	pods := c.Pods()
	require.Len(t, pods, 3)
	nameRE := regexp.MustCompile(`^nginx-deployment-([bcdfghjklmnpqrstvwxz2456789]{10})-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	nodes := map[string]int{}
	for _, p := range pods {
		m := nameRE.FindStringSubmatch(p.Name)
		require.NotNil(t, m, p.Name)
		assert.Equal(t, map[string]string{"app": "nginx", "pod-template-hash": m[1]}, p.Labels)
		assert.Equal(t, int32(80), p.Spec.Containers[0].Ports[0].ContainerPort)
		assert.Equal(t, corev1.PodPending, p.Status.Phase)
		assert.Empty(t, p.Status.PodIP)
		nodes[p.Spec.NodeName]++
	}
	assert.Equal(t, map[string]int{"node-1": 1, "node-2": 1, "node-3": 1}, nodes)

	// Deterministic: a second cluster makes the same names.
	c2 := newCluster(t, 3)
	require.NoError(t, c2.Apply(t.Context(), newDeployment("nginx-deployment", 3, nginx, corev1.ContainerPort{ContainerPort: 80})))
	assert.Equal(t, podNames(c), podNames(c2))

	// Scale up spreads over the least loaded nodes; scale down removes the newest first.
	first := podNames(c)
	require.NoError(t, c.ScaleDeployment("default", "nginx-deployment", 5))
	assert.Len(t, c.Pods(), 5)
	nodes = map[string]int{}
	for _, p := range c.Pods() {
		nodes[p.Spec.NodeName]++
	}
	assert.Equal(t, map[string]int{"node-1": 2, "node-2": 2, "node-3": 1}, nodes)
	require.NoError(t, c.ScaleDeployment("default", "nginx-deployment", 3))
	assert.Equal(t, first, podNames(c))
	d, err := c.Get(KindDeployment, "default", "nginx-deployment")
	require.NoError(t, err)
	assert.Equal(t, int32(3), *d.(*appsv1.Deployment).Spec.Replicas)
	assert.Equal(t, int32(3), d.(*appsv1.Deployment).Status.Replicas)

	// A terminating pod is replaced at once and stays until removed; a deleted one too.
	runPods(t, c)
	require.NoError(t, c.MarkTerminating("default", first[0]))
	assert.Len(t, c.Pods(), 4)
	require.NoError(t, c.Delete(t.Context(), KindPod, "default", first[0]))
	assert.Len(t, c.Pods(), 3)
	require.NoError(t, c.Delete(t.Context(), KindPod, "default", first[1]))
	assert.Len(t, c.Pods(), 3)
	assert.NotContains(t, podNames(c), first[1])

	// A new template replaces every pod (Recreate strategy).
	changed := newDeployment("nginx-deployment", 3, nginx, corev1.ContainerPort{ContainerPort: 8080})
	require.NoError(t, c.Apply(t.Context(), changed))
	for _, p := range c.Pods() {
		assert.Equal(t, int32(8080), p.Spec.Containers[0].Ports[0].ContainerPort)
	}
	assert.Len(t, c.Pods(), 3)

	require.NoError(t, c.Delete(t.Context(), KindDeployment, "default", "nginx-deployment"))
	assert.Empty(t, c.Pods())
}

func TestPodValidation(t *testing.T) {
	c := newCluster(t, 2)
	p := newPod("p", nil)
	p.Spec.NodeName = "node-9"
	require.ErrorContains(t, c.Apply(t.Context(), p), `no node "node-9"`)
	p.Spec.NodeName = "node-2"
	require.NoError(t, c.Apply(t.Context(), p))
	p.Spec.NodeName = "node-1"
	require.ErrorContains(t, c.Apply(t.Context(), p), "immutable")
	require.ErrorIs(t, c.SetPodStatus("default", "nope", PodStatus{}), ErrNotFound)
	require.ErrorContains(t, c.SetPodStatus("default", "p", PodStatus{IP: netip.MustParseAddr("fd00::1")}), "not an IPv4")
	require.ErrorIs(t, c.ScaleDeployment("default", "nope", 1), ErrNotFound)
	d := newDeployment("d", 1, map[string]string{"app": "d"})
	d.Spec.Template.Labels = map[string]string{"app": "other"}
	require.ErrorContains(t, c.Apply(t.Context(), d), "do not match spec.selector")
}
