//go:build linux

package kubestack_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
	"kpbench.dev/kpbench/kubestack"
	"kpbench.dev/kpbench/kubestack/kubelet"
	"kpbench.dev/kpbench/lab"
)

// upCluster builds a 2-node cluster with kube-proxy in mode, its record in a temporary
// directory, and takes it down in t.Cleanup unless the test did.
func upCluster(t *testing.T, mode kubeproxy.Mode) (*kubestack.Stack, kubernetes.Interface) {
	t.Helper()
	testutil.RequireRoot(t)
	upstreamtest.Require(t, upstream.Etcd, upstream.KubeAPIServer, upstream.KubeControllerManager, upstream.KubeScheduler, upstream.KubeProxy, upstream.CoreDNS)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := kubestack.Up(ctx, kubestack.Config{Name: "t" + testutil.RandomID(t, 6), Nodes: 2, Proxy: mode, Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Down(context.Background())) })
	rec := c.Record()
	require.NotNil(t, rec.Startup)
	t.Logf("cluster %s (%s) up in %.1fs: %+v", rec.Name, mode, rec.Startup.Total, *rec.Startup)
	for _, m := range rec.MemoryAtReady {
		t.Logf("  %s %s: %.0f MiB %s", m.Component, m.Node, float64(m.RSS)/(1<<20), m.Error)
	}
	// The admin kubeconfig, from the host's namespace, through the loopback forward.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(cfg.Host, "https://127.0.0.1:"), cfg.Host)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c, client
}

func webDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	// netexec answers /readyz 503 for 3 s after SIGTERM: a probe of threshold 1 every
	// second sees it, so the endpoint is seen terminating, then no longer serving.
	grace := int64(5)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: "agnhost", Image: upstream.AgnhostImage, Args: []string{"netexec", "--http-port=8080", "--delay-shutdown=3"},
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1, FailureThreshold: 1,
						},
					}},
				},
			},
		},
	}
}

// readyPods returns the Running, Ready pods of app=web: their IPs by name.
func readyPods(ctx context.Context, t *testing.T, client kubernetes.Interface) map[string]string {
	t.Helper()
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out[p.Name] = p.Status.PodIP
			}
		}
	}
	return out
}

// readyEndpoints counts the ready endpoints of the Service's EndpointSlices made by the
// controller manager.
func readyEndpoints(ctx context.Context, t *testing.T, client kubernetes.Interface, svc string) int {
	t.Helper()
	slices, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	require.NoError(t, err)
	n := 0
	for _, s := range slices.Items {
		assert.Equal(t, "endpointslice-controller.k8s.io", s.Labels[discoveryv1.LabelManagedBy])
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// execOn runs a command on a lab host and returns its output.
func execOn(ctx context.Context, t *testing.T, l *lab.Lab, host string, argv ...string) (string, error) {
	t.Helper()
	h, ok := l.Host(host)
	require.True(t, ok, host)
	res, err := netns.Exec(ctx, h.NetNSPath, netns.Command{Path: argv[0], Args: argv[1:]})
	return string(res.Stdout), err
}

// TestClusterServesAService is what `cluster up` promises, on iptables and nftables: a 2-node cluster
// comes up; a Deployment of 3 and a ClusterIP Service made through client-go become 3
// Running, Ready pods, an EndpointSlice of 3 ready endpoints from the controller manager,
// and kube-proxy rules; curl to the ClusterIP from a node answers with the pods' names;
// scaling to 1 takes endpoints through terminating; Down leaves no namespace, process or
// listener.
func TestClusterServesAService(t *testing.T) {
	testutil.RequireBinary(t, "curl")
	for _, tc := range []struct {
		mode     kubeproxy.Mode
		rules    []string // how to read the Service's rules on a node
		endpoint string   // how they name an endpoint (IP, port)
	}{
		{kubeproxy.ModeIPTables, []string{"iptables-save", "-t", "nat"}, "%s:%d"},                 // --to-destination 10.244.0.2:8080
		{kubeproxy.ModeNFTables, []string{"nft", "list", "table", "ip", "kube-proxy"}, "%s . %d"}, // map { 0 : 10.244.0.2 . 8080, ...}
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			testutil.RequireBinary(t, tc.rules[0])
			c, client := upCluster(t, tc.mode)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, err := client.AppsV1().Deployments("default").Create(ctx, webDeployment(3), metav1.CreateOptions{})
			require.NoError(t, err)
			svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)

			var pods map[string]string
			require.Eventually(t, func() bool { pods = readyPods(ctx, t, client); return len(pods) == 3 }, 2*time.Minute, 200*time.Millisecond, "3 Running, Ready pods")
			require.Eventually(t, func() bool { return readyEndpoints(ctx, t, client, "web") == 3 }, time.Minute, 200*time.Millisecond, "3 ready endpoints")
			// kube-proxy's rules on node-0 name the ClusterIP and DNAT to every pod.
			require.Eventually(t, func() bool {
				out, err := execOn(ctx, t, c.Lab(), "node-0", tc.rules...)
				if err != nil || !strings.Contains(out, svc.Spec.ClusterIP) {
					return false
				}
				for _, ip := range pods {
					if !strings.Contains(out, fmt.Sprintf(tc.endpoint, ip, 8080)) {
						return false
					}
				}
				return true
			}, time.Minute, 200*time.Millisecond, "kube-proxy programmed %s and its 3 endpoints on node-0", svc.Spec.ClusterIP)

			seen := map[string]int{}
			for range 30 {
				out, err := execOn(ctx, t, c.Lab(), "node-0", "curl", "-sS", "--max-time", "5", fmt.Sprintf("http://%s/hostname", svc.Spec.ClusterIP))
				require.NoError(t, err)
				require.Contains(t, pods, out, "answered by one of the pods (%v)", pods)
				seen[out]++
			}
			t.Logf("answers from the ClusterIP: %v", seen)
			assert.GreaterOrEqual(t, len(seen), 2, "at least 2 of the 3 pods answered")

			// Scale to 1: the removed pods' endpoints go through terminating (not ready,
			// terminating, still serving until /readyz fails) before they are gone.
			w, err := client.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
			require.NoError(t, err)
			defer w.Stop()
			scale, err := client.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
			require.NoError(t, err)
			scale.Spec.Replicas = 1
			_, err = client.AppsV1().Deployments("default").UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
			require.NoError(t, err)
			terminatingServing, terminatingNotServing := 0, 0
			deadline := time.After(2 * time.Minute)
			for done := false; !done; {
				select {
				case ev := <-w.ResultChan():
					s, ok := ev.Object.(*discoveryv1.EndpointSlice)
					if !ok || ev.Type == watch.Deleted {
						continue
					}
					ready := 0
					for _, e := range s.Endpoints {
						cond := e.Conditions
						if cond.Terminating != nil && *cond.Terminating {
							assert.False(t, *cond.Ready, "a terminating endpoint is not ready")
							if *cond.Serving {
								terminatingServing++
							} else {
								terminatingNotServing++
							}
						}
						if cond.Ready != nil && *cond.Ready {
							ready++
						}
					}
					done = len(s.Endpoints) == 1 && ready == 1
				case <-deadline:
					t.Fatal("the EndpointSlice did not come down to 1 ready endpoint")
				}
			}
			assert.Positive(t, terminatingServing, "endpoints were seen terminating and still serving")
			assert.Positive(t, terminatingNotServing, "endpoints were seen terminating, no longer serving (/readyz failed)")
			require.Eventually(t, func() bool {
				list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
				return err == nil && len(list.Items) == 1
			}, time.Minute, 200*time.Millisecond, "the kubelets deleted the pods after their grace period")
			var podHosts []string
			for _, h := range c.Lab().Hosts(lab.KindPod) {
				if h.Name != kubestack.DNSPod {
					podHosts = append(podHosts, h.Name)
				}
			}
			assert.Len(t, podHosts, 1, "their namespaces are gone (the cluster DNS's stays)")

			rec := c.Record()
			require.NoError(t, c.Down(context.Background()))
			assertGone(t, rec)
		})
	}
}

// assertGone checks that a cluster left no namespace, process, listener or file.
func assertGone(t *testing.T, rec kubestack.Record) {
	t.Helper()
	left, err := netns.List(netns.Prefix + "-" + rec.Name + "-")
	require.NoError(t, err)
	assert.Empty(t, left, "namespaces left")
	for _, p := range rec.Processes {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
		assert.True(t, err != nil || exe != p.Binary, "%s (pid %d) still runs", p.Component, p.PID)
	}
	addr := strings.TrimPrefix(rec.Server, "https://")
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "nothing listens on %s any more", addr)
	assert.NoDirExists(t, filepath.Dir(rec.Kubeconfig))
	_, err = lab.Registry{Dir: lab.DefaultRegistryDir}.Read(rec.Name)
	assert.ErrorIs(t, err, lab.ErrNotRegistered)
}

// TestLabKubeletIsHonest: what the lab kubelet cannot do is never reported as working: a
// readiness probe that fails keeps its pod unready, an exec readiness probe that fails
// (run in the pod) keeps its pod unready, what it ignores is reported in an event, a failing liveness probe restarts its
// container, two containers on one port make the second wait with the kernel's error.
// And a hostNetwork pod (as e2e tests run their probers) serves from its node's namespace.
func TestLabKubeletIsHonest(t *testing.T) {
	testutil.RequireBinary(t, "curl")
	c, client := upCluster(t, kubeproxy.ModeNFTables)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	httpProbe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			PeriodSeconds: 1, FailureThreshold: 1}
	}
	port := []corev1.ContainerPort{{ContainerPort: 8080}}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "ready"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Image: upstream.AgnhostImage, Ports: port, ReadinessProbe: httpProbe("/readyz", 8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unready"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Image: upstream.AgnhostImage, Ports: port, ReadinessProbe: httpProbe("/echo?code=503", 8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "exec"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Image: upstream.AgnhostImage, Ports: port, ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dead"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Image: upstream.AgnhostImage, Ports: port, LivenessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}},
				PeriodSeconds: 1, FailureThreshold: 1}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "clash"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "a", Image: upstream.AgnhostImage, Ports: port}, {Name: "b", Image: upstream.AgnhostImage, Ports: port}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hostnet"}, Spec: corev1.PodSpec{HostNetwork: true, NodeName: "node-1", Containers: []corev1.Container{
			{Name: "c", Image: upstream.AgnhostImage, Args: []string{"netexec", "--http-port=8085", "--udp-port=-1"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8085)}}, PeriodSeconds: 1}}}}},
	}
	for _, p := range pods {
		p.Namespace = "default"
		_, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	get := func(name string) *corev1.Pod {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return p
	}
	isReady := func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return isReady(get("ready")) }, 2*time.Minute, 200*time.Millisecond, "the control pod becomes Ready")

	// A hostNetwork pod serves netexec's own port in the node's namespace, as the node.
	require.Eventually(t, func() bool { return isReady(get("hostnet")) }, time.Minute, 200*time.Millisecond, "the hostNetwork pod becomes Ready")
	assert.Equal(t, "172.18.0.11", get("hostnet").Status.PodIP)
	out, err := execOn(ctx, t, c.Lab(), "node-0", "curl", "-sS", "--max-time", "5", "http://172.18.0.11:8085/hostname")
	require.NoError(t, err)
	assert.Equal(t, "node-1", out, "a hostNetwork pod's hostname is its node's")
	require.Eventually(t, func() bool {
		p := get("dead")
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	}, time.Minute, 200*time.Millisecond, "a failing liveness probe restarts the container")
	dead := get("dead").Status.ContainerStatuses[0]
	require.NotNil(t, dead.LastTerminationState.Terminated)
	assert.Equal(t, int32(kubelet.ExitCodeKilled), dead.LastTerminationState.Terminated.ExitCode)

	// For several probe periods after "ready" became Ready, the others never are.
	for _, name := range []string{"unready", "exec"} {
		assert.Never(t, func() bool { return isReady(get(name)) }, 3*time.Second, 200*time.Millisecond, "%s must not be Ready", name)
		assert.Equal(t, corev1.PodRunning, get(name).Status.Phase, name)
	}
	// What it does not do (the service account token volume) is said in an event.
	assert.Contains(t, get("exec").Status.Message, "volumes not mounted")
	events, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=exec,reason=" + kubelet.ReasonUnsupported})
	require.NoError(t, err)
	require.NotEmpty(t, events.Items, "a %s event on the exec pod", kubelet.ReasonUnsupported)
	assert.Equal(t, corev1.EventTypeWarning, events.Items[0].Type)

	clash := get("clash")
	require.Len(t, clash.Status.ContainerStatuses, 2)
	b := clash.Status.ContainerStatuses[1]
	require.NotNil(t, b.State.Waiting, "the second container cannot listen on 8080")
	assert.Equal(t, "RunContainerError", b.State.Waiting.Reason)
	assert.Contains(t, b.State.Waiting.Message, "address already in use")
	assert.Equal(t, corev1.PodPending, clash.Status.Phase)
}
