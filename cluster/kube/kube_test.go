package kube

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
)

func TestWorkload(t *testing.T) {
	pod := func(ports ...corev1.ContainerPort) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "a"}},
			Spec: corev1.PodSpec{
				Volumes:            []corev1.Volume{{Name: "v"}},
				ServiceAccountName: "robot",
				Containers: []corev1.Container{{Name: "c", Image: "nginx", Command: []string{"nginx"}, Ports: ports,
					VolumeMounts:   []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstrPort(80)}}}}},
			},
		}
	}
	tcp := func(p int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolTCP}
	}
	udp := func(p int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolUDP}
	}
	tests := []struct {
		name     string
		in       *corev1.Pod
		keep     bool
		wantArgs [][]string
	}{
		{"one TCP port", pod(tcp(80)), false, [][]string{{"netexec", "--http-port=80", "--udp-port=-1"}}},
		{"TCP and UDP", pod(tcp(80), udp(53)), false, [][]string{{"netexec", "--http-port=80", "--udp-port=53"}}},
		{"two TCP ports: a second netexec", pod(tcp(80), tcp(443)), false, [][]string{{"netexec", "--http-port=80", "--udp-port=-1"}, {"netexec", "--http-port=443", "--udp-port=-1"}}},
		{"UDP only: HTTP on a free port", pod(udp(53)), false, [][]string{{"netexec", "--http-port=20080", "--udp-port=53"}}},
		{"no ports: pause", pod(), false, [][]string{{"pause"}}},
		{"keep images", pod(tcp(80)), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, notes, err := Workload([]runtime.Object{tt.in}, WorkloadOptions{Namespace: "kpbench-x", RunID: "x", KeepImages: tt.keep})
			require.NoError(t, err)
			got := objs[0].(*corev1.Pod)
			assert.Equal(t, "kpbench-x", got.Namespace)
			assert.Equal(t, "x", got.Labels[RunLabel])
			assert.Equal(t, "a", got.Labels["app"])
			assert.Equal(t, "default", tt.in.Namespace, "the input is not changed")
			if tt.keep {
				assert.Equal(t, "nginx", got.Spec.Containers[0].Image)
				assert.Empty(t, notes)
				return
			}
			require.Len(t, got.Spec.Containers, len(tt.wantArgs))
			for i, c := range got.Spec.Containers {
				assert.Equal(t, upstream.AgnhostImage, c.Image)
				assert.Nil(t, c.Command)
				assert.Equal(t, tt.wantArgs[i], c.Args)
				assert.Empty(t, c.VolumeMounts)
			}
			var ports []corev1.ContainerPort
			for _, c := range got.Spec.Containers {
				ports = append(ports, c.Ports...)
			}
			assert.ElementsMatch(t, tt.in.Spec.Containers[0].Ports, ports, "declared ports stay (named targetPorts), each once")
			assert.Empty(t, got.Spec.Volumes)
			assert.Empty(t, got.Spec.ServiceAccountName)
			if rp := got.Spec.Containers[0].ReadinessProbe; rp != nil {
				assert.Nil(t, rp.HTTPGet)
				assert.Equal(t, intstrPort(80), rp.TCPSocket.Port)
			}
			assert.NotEmpty(t, notes)
		})
	}
}

func TestWorkloadRefusals(t *testing.T) {
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "a"}}
	b := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "b"}}
	_, _, err := Workload([]runtime.Object{a, b}, WorkloadOptions{Namespace: "kpbench-x"})
	assert.ErrorContains(t, err, "namespaces a and b both move to kpbench-x")
	_, _, err = Workload([]runtime.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "x"}}}, WorkloadOptions{Namespace: "kpbench-x"})
	assert.ErrorContains(t, err, "not supported")
}

func TestRESTConfigReadsOnlyTheGivenFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(good, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}, {name: d, cluster: {server: "https://127.0.0.2:2"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: one, context: {cluster: c, user: u}}, {name: two, context: {cluster: d, user: u}}]
current-context: one
`), 0o600))
	t.Setenv("KUBECONFIG", good)
	_, err := RESTConfig("", "")
	assert.ErrorIs(t, err, ErrBadConfig, "no path: no default kubeconfig")
	_, err = RESTConfig(filepath.Join(dir, "missing"), "")
	assert.ErrorIs(t, err, ErrBadConfig)
	cfg, err := RESTConfig(good, "")
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.1:1", cfg.Host)
	cfg, err = RESTConfig(good, "two")
	require.NoError(t, err)
	assert.Equal(t, "https://127.0.0.2:2", cfg.Host)
	_, err = RESTConfig(good, "three")
	assert.ErrorContains(t, err, `--context "three": no such context`)
}

func TestClassify(t *testing.T) {
	for msg, want := range map[string]probe.ErrClass{
		`Get "http://10.96.0.5:80/hostname": dial tcp 10.96.0.5:80: connect: connection refused`:                         probe.Refused,
		`Get "http://10.96.0.5:80/hostname": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`: probe.Timeout,
		`reading from udp connection failed. err:'read udp 10.244.0.2:4->10.96.0.9:53: i/o timeout'`:                     probe.Timeout,
		`reading from udp connection failed. err:'read udp 10.244.0.2:4->10.96.0.9:53: read: connection refused'`:        probe.Refused,
		`dial tcp 172.18.0.10:30000: connect: no route to host`:                                                          probe.Unreachable,
		`something else`: probe.Other,
	} {
		assert.Equal(t, want, classify(msg), msg)
	}
}

func TestProbesStayInTheCluster(t *testing.T) {
	tg := &Cluster{nodes: []lab.Host{{Name: "n", IP: netip.MustParseAddr("172.18.0.10")}},
		services: []*corev1.Service{{Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.7"}}}},
		pods:     []*corev1.Pod{{Status: corev1.PodStatus{PodIP: "10.244.0.5"}}}}
	for _, ip := range []string{"172.18.0.10", "10.96.0.7", "10.244.0.5"} {
		assert.NoError(t, tg.allowed(netip.MustParseAddr(ip)), ip)
	}
	for _, ip := range []string{"8.8.8.8", "127.0.0.1", "10.96.0.8"} {
		assert.ErrorContains(t, tg.allowed(netip.MustParseAddr(ip)), "refused to probe", ip)
	}
	r := &dialRequester{c: tg, pod: "p", port: 8080}
	res := r.Request(context.Background(), destinationOf(netip.MustParseAddrPort("8.8.8.8:53"), corev1.ProtocolUDP), probeOptions())
	assert.Equal(t, probe.Other, res.Class, "refused before any request")
}

func TestNewPlansAndLimits(t *testing.T) {
	node := func(name, ip string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	client := fake.NewSimpleClientset(node("b", "172.18.0.11", corev1.ConditionTrue), node("a", "172.18.0.10", corev1.ConditionTrue), node("c", "172.18.0.12", corev1.ConditionFalse))
	three := int32(3)
	objs := []runtime.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: &three}}}
	tg, err := New(context.Background(), client, objs, Options{RunID: "r"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, []string{tg.Nodes()[0].Name, tg.Nodes()[1].Name}, "Ready nodes in name order")
	assert.Equal(t, 1+4+1+3, tg.ObjectCount(), "namespace, 2 probers per node, the Deployment and its pods")
	_, err = New(context.Background(), client, objs, Options{RunID: "r", MaxObjects: 8})
	assert.ErrorIs(t, err, ErrBadConfig)
	assert.ErrorContains(t, err, "9 objects and pods, more than --max-objects 8")
	assert.Equal(t, []string{"node-0", "node-1"}, []string{tg.Hosts(lab.KindNode)[0].Name, tg.Hosts(lab.KindNode)[1].Name}, "the nodes as a scenario names them")
	assert.Equal(t, "kpb-prober-a", tg.ProbeHost("node-0"))
	host, note, err := tg.ClientFor("client-0", "node-0")
	require.NoError(t, err)
	assert.Equal(t, "node-1", host.Name, "NodePort traffic from another node's host network")
	assert.Contains(t, note, "node-1's host network")
	pr, err := tg.Prober(host.Name)
	require.NoError(t, err)
	assert.Equal(t, "kpb-hprober-b", pr.(podProber).r.pod, "node-1's hostNetwork prober sends")
	assert.ErrorIs(t, tg.AddClientRoute(context.Background(), netip.MustParsePrefix("192.0.2.1/32")), cluster.ErrNotAvailable,
		"load-balancer and external IPs are not reached from inside")
	_, err = tg.Prober("client-0")
	assert.ErrorIs(t, err, cluster.ErrNotAvailable, "no client outside the cluster")
	one := &Cluster{nodes: tg.nodes[:1]}
	_, _, err = one.ClientFor("client-0", "node-0")
	assert.ErrorIs(t, err, cluster.ErrNotAvailable, "a one-node cluster has no other node to send from")
}

// TestNotReady: the objects have settled only when every pod is Ready and not being
// deleted, every Deployment has its replicas, and every selector Service's endpoints
// are exactly its ready pods.
func TestNotReady(t *testing.T) {
	two := int32(2)
	ready := true
	pod := func(name, ip string, isReady bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if isReady {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: &two,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	slice := func(ips ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-x", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
		for _, ip := range ips {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		return s
	}
	for _, tt := range []struct {
		name  string
		pods  []*corev1.Pod
		slice *discoveryv1.EndpointSlice
		want  string
	}{
		{"settled", []*corev1.Pod{pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", true)}, slice("10.0.0.1", "10.0.0.2"), ""},
		{"pod not ready", []*corev1.Pod{pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", false)}, slice("10.0.0.1"), "pod b not ready"},
		{"deployment short of a pod", []*corev1.Pod{pod("a", "10.0.0.1", true)}, slice("10.0.0.1"), "Deployment web: 1/2 pods"},
		{"endpoint missing", []*corev1.Pod{pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", true)}, slice("10.0.0.1"), "Service web: 1 ready endpoints, 2 ready pods"},
		{"stale endpoint", []*corev1.Pod{pod("a", "10.0.0.1", true), pod("b", "10.0.0.2", true)}, slice("10.0.0.1", "10.0.0.9"), "endpoint 10.0.0.9 is no ready pod"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cluster{pods: tt.pods, deployments: []*appsv1.Deployment{dep}, services: []*corev1.Service{svc},
				slices: []*discoveryv1.EndpointSlice{tt.slice}}
			got := c.notReady()
			if tt.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tt.want)
			}
		})
	}
}

func TestCleanup(t *testing.T) {
	dead := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kpbench-dead", Labels: map[string]string{RunLabel: "dead"},
		Annotations: map[string]string{OwnerAnnotation: "elsewhere/1"}}}
	host, _ := os.Hostname()
	alive := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kpbench-alive", Labels: map[string]string{RunLabel: "alive"},
		Annotations: map[string]string{OwnerAnnotation: host + "/" + itoa(os.Getpid())}}}
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}
	client := fake.NewSimpleClientset(dead, alive, other)
	res, err := Cleanup(context.Background(), client, false, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{"kpbench-dead"}, res.Removed)
	assert.Len(t, res.Kept, 1, "a live run's namespace is kept")
	res, err = Cleanup(context.Background(), client, true, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{"kpbench-alive"}, res.Removed, "--force")
	_, err = client.CoreV1().Namespaces().Get(context.Background(), "prod", metav1.GetOptions{})
	assert.NoError(t, err, "an unlabelled namespace is never touched")
}

func itoa(i int) string { return strconv.Itoa(i) }
