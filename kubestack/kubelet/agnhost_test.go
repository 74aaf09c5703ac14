//go:build linux

package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
)

// requireAgnhost returns the agnhost binary, or skips (fails under
// KPBENCH_REQUIRE_UPSTREAM=1) when `make upstream` has not built it.
func requireAgnhost(t *testing.T) string {
	t.Helper()
	p := AgnhostPath()
	if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o111 == 0 {
		if os.Getenv(upstream.RequireEnv) == "1" {
			t.Fatalf("no agnhost binary at %s (and %s=1 forbids skipping)", p, upstream.RequireEnv)
		}
		t.Skipf("needs the agnhost binary at %s: run make upstream", p)
	}
	return p
}

// labKubelet brings up a one-node lab and a lab kubelet on it that talks to a fake API
// server, removed when the test ends.
func labKubelet(t *testing.T, ctx context.Context, agnhost string) (*Kubelet, *fake.Clientset, lab.Host) {
	t.Helper()
	testutil.RequireRoot(t)
	l, err := lab.Up(ctx, lab.Config{Name: "t" + testutil.RandomID(t, 6), Nodes: 1})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Down(context.Background())) })
	node := l.Hosts(lab.KindNode)[0]
	client := fake.NewClientset()
	k, err := Start(ctx, Options{Node: node, Network: l, client: client, StateDir: t.TempDir(), Agnhost: agnhost})
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	return k, client, node
}

// waitPod polls the Pod until ok says yes, and returns it.
func waitPod(t *testing.T, ctx context.Context, client *fake.Clientset, ns, name string, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	var last *corev1.Pod
	for {
		if p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			if ok(p) {
				return p
			}
			last = p
		}
		select {
		case <-tick.C:
		case <-deadline:
			require.FailNow(t, "pod "+ns+"/"+name+": "+what, "last status: %s", statusOf(last))
		}
	}
}

// statusOf renders a pod's status for a failure message.
func statusOf(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	b, _ := json.MarshalIndent(p.Status, "", "  ")
	return string(b)
}

// dumpOnFailure logs the pod's events and container logs when the test failed.
func dumpOnFailure(t *testing.T, ctx context.Context, client *fake.Clientset, k *Kubelet, pod *corev1.Pod) {
	if !t.Failed() {
		return
	}
	if events, err := client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}
	for _, c := range pod.Spec.Containers {
		b, err := readLog(ctx, k, pod, c.Name)
		t.Logf("log of %s (%v):\n%s", c.Name, err, b)
	}
}

// readLog returns the log of the latest instance of a container of pod, as kubectl logs
// reads it.
func readLog(ctx context.Context, k *Kubelet, pod *corev1.Pod, container string) (string, error) {
	var b strings.Builder
	err := k.logs.Read(ctx, PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, container, &corev1.PodLogOptions{}, &b)
	return b.String(), err
}

func podIsReady(p *corev1.Pod) bool { return podReady(p.Status) }

// TestAgnhostNetexec: an agnhost netexec container runs the real agnhost in the pod's
// namespaces: it answers /hostname with the pod's name (its own UTS namespace) over the
// pod's IP from the node, sees its downward-API env, logs to its log file, and on
// deletion stops at SIGTERM long before its grace period ends.
func TestAgnhostNetexec(t *testing.T) {
	bin := requireAgnhost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, client, node := labKubelet(t, ctx, bin)

	grace := int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "netexec-0", Namespace: "default", UID: "uid-netexec-0"},
		Spec: corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{
			Name: "agnhost", Image: upstream.AgnhostImage, Args: []string{"netexec", "--http-port=$(PORT)"},
			Env: []corev1.EnvVar{
				{Name: "PORT", Value: "8080"},
				{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			// Its first probe may come before netexec listens; then it passes: no restart.
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1, FailureThreshold: 3},
		}}},
	}
	_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { dumpOnFailure(t, ctx, client, k, pod) })
	got := waitPod(t, ctx, client, "default", pod.Name, "Ready", podIsReady)
	require.NotEmpty(t, got.Status.PodIP)
	cs := got.Status.ContainerStatuses[0]
	assert.Equal(t, ProcessImageID+bin, cs.ImageID)
	assert.NotNil(t, cs.State.Running)

	d, err := probe.New(node.NetNSPath)
	require.NoError(t, err)
	defer d.Close()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	get := func(path string) string {
		resp, err := hc.Get("http://" + got.Status.PodIP + ":8080" + path)
		require.NoError(t, err, path)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
		return string(b)
	}
	assert.Equal(t, pod.Name, get("/hostname"), "the pod's hostname, from its own UTS namespace")
	assert.Equal(t, node.Name, get("/envvar?var=NODE_NAME"))
	assert.Equal(t, got.Status.PodIP, get("/envvar?var=POD_IP"))
	assert.Never(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.ContainerStatuses[0].RestartCount > 0
	}, 3*time.Second, 200*time.Millisecond, "a passing liveness probe restarts nothing")

	require.Eventually(t, func() bool {
		b, _ := readLog(ctx, k, got, "agnhost")
		return strings.Contains(b, "GET /hostname")
	}, 10*time.Second, 100*time.Millisecond, "netexec logs what it serves")

	// Graceful deletion, as the API server marks it: netexec exits at SIGTERM (0), the pod
	// is done long before its 30 s, and the kubelet deletes the Pod object.
	start := time.Now()
	now := metav1.Now()
	got.DeletionTimestamp, got.DeletionGracePeriodSeconds = &now, &grace
	_, err = client.CoreV1().Pods("default").Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil
	}, 20*time.Second, 100*time.Millisecond, "the kubelet deletes the pod once its container exited")
	assert.Less(t, time.Since(start), 15*time.Second, "SIGTERM ended netexec before the grace period")
	_, err = os.Stat(filepath.Join(k.opts.StateDir, "pods", string(pod.UID)))
	assert.True(t, os.IsNotExist(err), "the pod's files are gone: %v", err)
	_, err = readLog(ctx, k, got, "agnhost")
	assert.Error(t, err, "the logs go with the pod, as a kubelet removes them")
}

// TestExecReadinessProbe: exec readiness probes run in the pod's namespaces (hostname and
// /etc/hosts are the pod's): /bin/false keeps its container NotReady while the one whose
// probe passes becomes Ready, and the pod stays NotReady.
func TestExecReadinessProbe(t *testing.T) {
	bin := requireAgnhost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, client, node := labKubelet(t, ctx, bin)

	execProbe := func(cmd ...string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: 1, FailureThreshold: 1}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "exec-probe", Namespace: "default", UID: "uid-exec-probe"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{
			{Name: "good", Image: upstream.AgnhostImage, Args: []string{"netexec", "--http-port=8080", "--udp-port=-1"},
				ReadinessProbe: execProbe("/bin/sh", "-c", `[ "$(hostname)" = exec-probe ] && grep -q exec-probe /etc/hosts`)},
			{Name: "bad", Image: upstream.AgnhostImage, Args: []string{"pause"}, ReadinessProbe: execProbe("/bin/false")},
		}},
	}
	_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	got := waitPod(t, ctx, client, "default", pod.Name, "container good Ready", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "good" {
				return cs.Ready
			}
		}
		return false
	})
	assert.Equal(t, corev1.PodRunning, got.Status.Phase)
	// The bad probe ran too, and failed: an event says so.
	require.Eventually(t, func() bool {
		events, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range events.Items {
			if e.Reason == "Unhealthy" && strings.Contains(e.Message, "container bad") {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "an Unhealthy event names the container whose probe fails")
	got, err = client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, cs := range got.Status.ContainerStatuses {
		if cs.Name == "bad" {
			assert.False(t, cs.Ready, "/bin/false keeps the container NotReady")
			assert.NotNil(t, cs.State.Running)
		}
	}
	assert.False(t, podIsReady(got))
}

// TestProcessLifecycle: processes' exits reach the container status and the pod phase as
// restartPolicy says; init containers run first, in order; a deleted pod's preStop hook
// runs before SIGTERM, and a process that ignores SIGTERM is killed (137) at the end of
// its grace period.
func TestProcessLifecycle(t *testing.T) {
	bin := requireAgnhost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, client, node := labKubelet(t, ctx, bin)
	marks := t.TempDir()
	sh := func(name, script string) corev1.Container {
		return corev1.Container{Name: name, Image: upstream.AgnhostImage, Command: []string{"/bin/sh", "-c", script}}
	}
	terminated := func(cs []corev1.ContainerStatus, name string) *corev1.ContainerStateTerminated {
		for _, c := range cs {
			if c.Name == name {
				return c.State.Terminated
			}
		}
		return nil
	}
	tests := []struct {
		name   string
		spec   corev1.PodSpec
		until  string
		done   func(*corev1.Pod) bool
		check  func(t *testing.T, p *corev1.Pod)
		delete bool
	}{
		{name: "init first, then exit 3 with Never: Failed", spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{sh("init", "echo init >> "+marks+"/order")},
			Containers:     []corev1.Container{sh("main", "echo main >> "+marks+"/order; exit 3")}},
			until: "Failed", done: func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed },
			check: func(t *testing.T, p *corev1.Pod) {
				b, err := os.ReadFile(marks + "/order")
				require.NoError(t, err)
				assert.Equal(t, "init\nmain\n", string(b))
				init := terminated(p.Status.InitContainerStatuses, "init")
				require.NotNil(t, init)
				assert.Equal(t, "Completed", init.Reason)
				main := terminated(p.Status.ContainerStatuses, "main")
				require.NotNil(t, main)
				assert.Equal(t, int32(3), main.ExitCode)
				assert.Equal(t, "Error", main.Reason)
			}},
		{name: "exit 0 with OnFailure: Succeeded", spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{sh("main", "exit 0")}},
			until: "Succeeded", done: func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded }},
		{name: "exit 1 with OnFailure: restarted", spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{sh("main", "exit 1")}},
			until: "restarted", done: func(p *corev1.Pod) bool {
				return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
			},
			check: func(t *testing.T, p *corev1.Pod) {
				last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
				require.NotNil(t, last)
				assert.Equal(t, int32(1), last.ExitCode)
				assert.Equal(t, corev1.PodRunning, p.Status.Phase)
			}},
		{name: "an init container that fails with Never fails the pod", spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{sh("init", "exit 7")},
			Containers:     []corev1.Container{sh("main", "echo never >> "+marks+"/never")}},
			until: "Failed", done: func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed },
			check: func(t *testing.T, p *corev1.Pod) {
				_, err := os.Stat(marks + "/never")
				assert.True(t, os.IsNotExist(err), "the regular container never ran")
				init := terminated(p.Status.InitContainerStatuses, "init")
				require.NotNil(t, init)
				assert.Equal(t, int32(7), init.ExitCode)
			}},
		{name: "preStop, then SIGTERM ignored: killed at the end of the grace period", spec: corev1.PodSpec{
			Containers: []corev1.Container{func() corev1.Container {
				c := sh("stubborn", "trap '' TERM; while :; do sleep 0.1; done")
				c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "hostname > " + marks + "/prestop"}}}}
				return c
			}()}},
			until: "Running", done: func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, delete: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("life-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-life-%d", i))}, Spec: tt.spec}
			pod.Spec.NodeName = node.Name
			_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() { dumpOnFailure(t, ctx, client, k, pod) })
			got := waitPod(t, ctx, client, "default", pod.Name, tt.until, tt.done)
			if tt.check != nil {
				tt.check(t, got)
			}
			if !tt.delete {
				return
			}
			grace := int64(1)
			now := metav1.Now()
			got.DeletionTimestamp, got.DeletionGracePeriodSeconds = &now, &grace
			var last *corev1.Pod
			watcher, err := client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			defer watcher.Stop()
			start := time.Now()
			_, err = client.CoreV1().Pods("default").Update(ctx, got, metav1.UpdateOptions{})
			require.NoError(t, err)
			for ev := range watcher.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || p.Name != pod.Name {
					continue
				}
				if ev.Type == "DELETED" {
					break
				}
				last = p
			}
			assert.GreaterOrEqual(t, time.Since(start), time.Second, "the process ignored SIGTERM for the grace period")
			require.NotNil(t, last)
			term := terminated(last.Status.ContainerStatuses, "stubborn")
			require.NotNil(t, term, "the last status before deletion: %s", statusOf(last))
			assert.Equal(t, int32(ExitCodeKilled), term.ExitCode)
			b, err := os.ReadFile(marks + "/prestop")
			require.NoError(t, err, "the preStop hook ran")
			assert.Equal(t, pod.Name+"\n", string(b), "in the pod's UTS namespace")
		})
	}
}
