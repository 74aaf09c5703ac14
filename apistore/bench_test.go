package apistore

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kpbench.dev/kpbench/backends"
)

// TestNginxExampleToState runs the seed example (examples/nginx-nodeport.yaml) through the
// control plane and the proxy's view.
func TestNginxExampleToState(t *testing.T) {
	c := newCluster(t, 3)
	d := newDeployment("nginx-deployment", 3, map[string]string{"app": "nginx"}, corev1.ContainerPort{ContainerPort: 80})
	d.Labels = map[string]string{"app": "nginx"}
	svc := newSvc("nginx-service", withNodePort(30791), withSelector(map[string]string{"app": "nginx"}),
		withPorts(corev1.ServicePort{Port: 88, TargetPort: intstr.FromInt32(80), NodePort: 30791, Protocol: corev1.ProtocolTCP}))
	svc.Labels = map[string]string{"app": "nginx"}
	require.NoError(t, c.Apply(t.Context(), d, svc))
	runPods(t, c)
	st := backends.BuildState(backends.NodeView{Name: "node-2"}, backends.ViewOptions{}, c.Services(), c.EndpointSlices())
	require.Len(t, st.Services, 1)
	sp := st.Services[0]
	assert.Equal(t, backends.ServicePortName{Namespace: "default", Name: "nginx-service", Protocol: backends.TCP}, sp.Name)
	assert.Equal(t, netip.MustParseAddr("10.96.0.2"), sp.ClusterIP)
	assert.Equal(t, int32(88), sp.Port)
	assert.Equal(t, int32(30791), sp.NodePort)
	require.Len(t, sp.Endpoints, 3)
	local := 0
	for _, e := range sp.Endpoints {
		assert.Equal(t, int32(80), e.Port)
		assert.True(t, e.Ready)
		if e.IsLocal {
			local++
			assert.Equal(t, "node-2", e.NodeName)
		}
	}
	assert.Equal(t, 1, local)

	// A headless service of the same pods is not in the view.
	require.NoError(t, c.Apply(t.Context(), newSvc("headless", withClusterIP("None"), withSelector(map[string]string{"app": "nginx"}))))
	st = backends.BuildState(backends.NodeView{Name: "node-2"}, backends.ViewOptions{}, c.Services(), c.EndpointSlices())
	assert.Len(t, st.Services, 1)
}

// BenchmarkApply20kServices applies 20,000 ClusterIP services with 2 pods each in one Apply,
// lets the kubelet report every pod, and builds one node's view: the control plane side of
// the largest perf ladder step.
func BenchmarkApply20kServices(b *testing.B) {
	const n = 20000
	objs := make([]apiruntime.Object, 0, 3*n)
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		labels := map[string]string{"app": name}
		objs = append(objs, newSvc(name, withSelector(labels)),
			newPod(name+"-a", labels, corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
			newPod(name+"-b", labels, corev1.ContainerPort{Name: "http", ContainerPort: 8080}))
	}
	b.ReportAllocs()
	var heap uint64
	var apply, status, view time.Duration
	for b.Loop() {
		c := newCluster(b, 4)
		t0 := time.Now()
		require.NoError(b, c.Apply(b.Context(), objs...))
		t1 := time.Now()
		ip := netip.MustParseAddr("10.244.0.1")
		for _, p := range c.Pods() {
			require.NoError(b, c.SetPodStatus(p.Namespace, p.Name, PodStatus{IP: ip, Ready: true}))
			ip = ip.Next()
		}
		t2 := time.Now()
		st := backends.BuildState(backends.NodeView{Name: "node-1"}, backends.ViewOptions{}, c.Services(), c.EndpointSlices())
		t3 := time.Now()
		apply, status, view = apply+t1.Sub(t0), status+t2.Sub(t1), view+t3.Sub(t2)
		if len(st.Services) != n || len(st.Services[n-1].Endpoints) != 2 {
			b.Fatalf("state has %d services", len(st.Services))
		}
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = ms.HeapAlloc
		runtime.KeepAlive(c)
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(apply.Seconds()/float64(b.N), "apply-s/op")
	b.ReportMetric(status.Seconds()/float64(b.N), "podstatus-s/op")
	b.ReportMetric(view.Seconds()/float64(b.N), "view-s/op")
}
