//go:build linux

package kubelet_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
	"kpbench.dev/kpbench/kubestack"
	"kpbench.dev/kpbench/kubestack/kubelet"
)

// kubectlRunner runs the upstream kubectl with the cluster's admin kubeconfig.
type kubectlRunner struct {
	bin, kubeconfig string
}

func (k kubectlRunner) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
}

// waitRunning waits until the pods are Running with an IP.
func waitRunning(ctx context.Context, t *testing.T, client kubernetes.Interface, names ...string) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			p, err := client.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return false, nil
			}
			out[n] = p
		}
		return true, nil
	})
	require.NoError(t, err, "pods %v not Running", names)
	return out
}

// TestKubectlThroughTheAPIServer is the kubelet API end to end on a `cluster up` cluster:
// kubectl exec (exit code, stdin, a terminal, the pod's hostname and resolv.conf, traffic to
// a Service from the pod's network), kubectl logs and kubectl port-forward, all through the
// API server to the lab kubelet; and the kubelet refuses an exec that comes without the
// API server's client certificate.
func TestKubectlThroughTheAPIServer(t *testing.T) {
	testutil.RequireRoot(t)
	bins := upstreamtest.Require(t, append(kubestack.Binaries(), upstream.Kubectl)...)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	stack, err := kubestack.Up(ctx, kubestack.Config{Name: "t" + testutil.RandomID(t, 6), Nodes: 2, Proxy: kubeproxy.ModeIPTables, Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, stack.Down(context.Background())) })
	cfg, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig())
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	kubectl := kubectlRunner{bin: bins[upstream.Kubectl], kubeconfig: stack.Kubeconfig()}

	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "server", Labels: map[string]string{"app": "server"}},
			Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "agnhost", Image: upstream.AgnhostImage,
				Args: []string{"netexec", "--http-port=8080"}, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "client"},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "agnhost", Image: upstream.AgnhostImage, Args: []string{"pause"}}}}},
	} {
		_, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "server"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pods := waitRunning(ctx, t, client, "server", "client")

	t.Run("exec exit code, hostname, resolv.conf, a Service", func(t *testing.T) {
		// kube-proxy programs the Service shortly after its endpoints exist: retry the
		// connection inside the command, not the exec.
		script := fmt.Sprintf("hostname; cat /etc/resolv.conf; for i in $(seq 50); do out=$(curl -s -m 1 http://%s:80/hostname) && break; sleep 0.2; done; echo \"svc=$out\"; exit 3", svc.Spec.ClusterIP)
		cmd := kubectl.cmd(ctx, "exec", "client", "--", "/bin/sh", "-c", script)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "kubectl exec: %v: %s", err, out)
		assert.Equal(t, 3, ee.ExitCode(), "the command's exit code comes back: %s", out)
		assert.Contains(t, string(out), "client\n")
		assert.Contains(t, string(out), "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\n")
		assert.Contains(t, string(out), "svc=server", "the Service answers from the pod's network")
	})

	t.Run("/agnhost connect", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(upstream.BinDir(), "agnhost")); err != nil {
			if os.Getenv(upstream.RequireEnv) == "1" {
				t.Fatalf("no agnhost binary built (and %s=1 forbids skipping)", upstream.RequireEnv)
			}
			t.Skip("no agnhost binary built: /agnhost is not there to run")
		}
		// As the e2e suite checks a Service without endpoints: REFUSED on stderr.
		out, err := kubectl.cmd(ctx, "exec", "client", "--", "/agnhost", "connect", "--timeout=3s", "--protocol=tcp", fmt.Sprintf("%s:81", pods["server"].Status.PodIP)).CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "REFUSED")
	})

	t.Run("exec -i", func(t *testing.T) {
		cmd := kubectl.cmd(ctx, "exec", "-i", "client", "--", "tr", "a-z", "A-Z")
		cmd.Stdin = strings.NewReader("hello from stdin\n")
		out, err := cmd.Output()
		require.NoError(t, err)
		assert.Equal(t, "HELLO FROM STDIN\n", string(out))
	})

	t.Run("exec -it", func(t *testing.T) {
		cmd := kubectl.cmd(ctx, "exec", "-it", "client", "--", "/bin/sh", "-c", "test -t 0 && test -t 1 && echo on-a-terminal; stty size")
		term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 33, Cols: 99})
		require.NoError(t, err)
		defer term.Close()
		var out bytes.Buffer
		_, _ = io.Copy(&out, term) // EIO once kubectl exits
		require.NoError(t, cmd.Wait(), out.String())
		assert.Contains(t, out.String(), "on-a-terminal")
		assert.Contains(t, out.String(), "33 99", "kubectl's terminal size reaches the command")
	})

	t.Run("logs", func(t *testing.T) {
		out, err := kubectl.cmd(ctx, "logs", "server").CombinedOutput()
		require.NoError(t, err, string(out))
		// The real agnhost netexec's log, or the echo server's line where it stands in.
		if _, err := os.Stat(kubelet.AgnhostPath()); err == nil {
			assert.Contains(t, string(out), "Started HTTP server on port")
		} else {
			assert.Contains(t, string(out), "kpbench lab kubelet: container agnhost")
		}
		out, err = kubectl.cmd(ctx, "logs", "server", "--previous").CombinedOutput()
		require.Error(t, err, "no previous instance: %s", out)
	})

	t.Run("port-forward", func(t *testing.T) {
		pctx, pcancel := context.WithCancel(ctx)
		defer pcancel()
		cmd := kubectl.cmd(pctx, "port-forward", "pod/server", "--address", "127.0.0.1", ":8080")
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() { pcancel(); _ = cmd.Wait() }()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		m := regexp.MustCompile(`127\.0\.0\.1:(\d+) -> 8080`).FindStringSubmatch(line)
		require.NotNil(t, m, line)
		resp, err := http.Get("http://127.0.0.1:" + m[1] + "/hostname")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, "server", strings.TrimSpace(string(body)))
	})

	t.Run("no client certificate, no exec", func(t *testing.T) {
		node, ok := stack.Lab().Host("node-0")
		require.True(t, ok)
		// From inside the lab (the node's namespace), straight to the kubelet, with TLS
		// but no client certificate.
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // the test checks the client side of the handshake only
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var c net.Conn
				err := netns.Do(node.NetNSPath, func() error {
					var err error
					c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
		}
		defer tr.CloseIdleConnections()
		url := fmt.Sprintf("https://%s:%d/exec/default/server/agnhost?command=touch&command=/tmp/kpbench-exec-refused&output=1", pods["server"].Status.HostIP, kubelet.DefaultAPIPort)
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post(url, "", nil)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.NoFileExists(t, "/tmp/kpbench-exec-refused")
	})

	t.Run("exec latency", func(t *testing.T) {
		const n = 20
		var d []time.Duration
		for range n {
			t0 := time.Now()
			out, err := kubectl.cmd(ctx, "exec", "client", "--", "true").CombinedOutput()
			require.NoError(t, err, string(out))
			d = append(d, time.Since(t0))
		}
		slices.Sort(d)
		t.Logf("kubectl exec POD -- true, %d runs: min %s, median %s, p90 %s, max %s", n, d[0], d[n/2], d[n*9/10], d[n-1])
	})
	_ = os.Remove("/tmp/kpbench-exec-refused")
}
