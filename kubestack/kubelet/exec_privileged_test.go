//go:build linux

package kubelet

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/utils/exec"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab"
)

// nopCloser makes a buffer a WriteCloser.
type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// signalWriter closes ch at the first write.
type signalWriter struct {
	ch   chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

func (w *signalWriter) Close() error { return nil }

// newExecTestKubelet is a kubelet that runs execs through this test binary as the helper,
// into a pod ns1/web-0 (10.244.0.5) whose network namespace is a throwaway one, with a
// stand-in agnhost that echoes its arguments.
func newExecTestKubelet(t testing.TB) (*Kubelet, podTarget) {
	_, nsPath := testutil.NewNetNS(t)
	state := t.TempDir()
	agnhost := filepath.Join(t.TempDir(), "agnhost")
	require.NoError(t, os.WriteFile(agnhost, []byte("#!/bin/sh\necho agnhost \"$@\"\n"), 0o755))
	k := &Kubelet{opts: Options{
		Node: lab.Host{Name: "node-0"}, StateDir: state, Agnhost: agnhost,
		ClusterDNS: netip.MustParseAddr("10.96.0.10"), ClusterDomain: DefaultClusterDomain,
	}}
	var err error
	k.execRoot, err = execRootDir(state)
	require.NoError(t, err)
	k.execer = helperExecutor([]string{os.Args[0], PodExecCommand})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web-0", UID: "uid-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "GREETING", Value: "hi"}}}}}}
	return k, podTarget{pod: pod, sb: &sandbox{nsPath: nsPath, podIP: netip.MustParseAddr("10.244.0.5"), dir: filepath.Join(state, "pods", "uid-1"), ctx: context.Background()}}
}

// BenchmarkExecInPod is the cost of one exec through the helper (fork, namespaces, the
// pod's root, exec of /bin/true), without the API server and kubectl.
func BenchmarkExecInPod(b *testing.B) {
	k, target := newExecTestKubelet(b)
	for b.Loop() {
		if err := k.exec(context.Background(), target, "c", []string{"/bin/true"}, nil, nil, nil, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExecInPodNamespaces runs commands through the exec helper (this test binary, see
// TestMain) in a real network namespace: they see the pod's network, hostname and files,
// get their stdin, and their exit codes come back; the host's files, hostname and mounts
// are left as they were.
func TestExecInPodNamespaces(t *testing.T) {
	k, target := newExecTestKubelet(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := target.pod

	hostHostname, err := os.Hostname()
	require.NoError(t, err)
	hostResolv, err := os.ReadFile("/etc/resolv.conf")
	require.NoError(t, err)
	mountsBefore, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)

	cases := []struct {
		name      string
		cmd       string
		stdin     string
		wantOut   string
		wantExit  int
		wantInErr string
	}{
		{name: "hostname", cmd: "hostname", wantOut: "web-0\n"},
		{name: "resolv.conf", cmd: "cat /etc/resolv.conf", wantOut: "search ns1.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{name: "hosts", cmd: "tail -n 1 /etc/hosts", wantOut: "10.244.0.5\tweb-0\n"},
		{name: "network", cmd: "ls /sys/class/net", wantOut: "lo\n"},
		{name: "agnhost", cmd: "/agnhost connect 10.96.0.1:443", wantOut: "agnhost connect 10.96.0.1:443\n"},
		{name: "env", cmd: "echo $GREETING $HOSTNAME", wantOut: "hi web-0\n"},
		{name: "stdin", cmd: "tr a-z A-Z", stdin: "hello\n", wantOut: "HELLO\n"},
		{name: "exit code", cmd: "echo out; echo err >&2; exit 3", wantOut: "out\n", wantExit: 3, wantInErr: "err\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			var in *strings.Reader
			if tc.stdin != "" {
				in = strings.NewReader(tc.stdin)
			}
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var err error
			if in != nil {
				err = k.exec(ctx, target, "c", []string{"/bin/sh", "-c", tc.cmd}, in, nopCloser{&out}, nopCloser{&errOut}, false, nil)
			} else {
				err = k.exec(ctx, target, "c", []string{"/bin/sh", "-c", tc.cmd}, nil, nopCloser{&out}, nopCloser{&errOut}, false, nil)
			}
			if tc.wantExit != 0 {
				var ee utilexec.ExitError
				require.True(t, errors.As(err, &ee), "want exit %d, got %v (stderr %q)", tc.wantExit, err, errOut.String())
				assert.Equal(t, tc.wantExit, ee.ExitStatus())
				assert.Equal(t, tc.wantInErr, errOut.String())
			} else {
				require.NoError(t, err, "stderr: %s", errOut.String())
			}
			assert.Equal(t, tc.wantOut, out.String())
		})
	}

	t.Run("not found", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := k.exec(ctx, target, "c", []string{"no-such-program"}, nil, nopCloser{&out}, nopCloser{&errOut}, false, nil)
		var ee utilexec.ExitError
		require.True(t, errors.As(err, &ee), "got %v", err)
		assert.Equal(t, ExitCodeNotFound, ee.ExitStatus())
		assert.Contains(t, errOut.String(), "executable file not found")
	})

	t.Run("pod torn down", func(t *testing.T) {
		podCtx, podCancel := context.WithCancel(ctx)
		gone := podTarget{pod: pod, sb: &sandbox{nsPath: target.sb.nsPath, podIP: target.sb.podIP, dir: target.sb.dir, ctx: podCtx}}
		done := make(chan error, 1)
		started := &signalWriter{ch: make(chan struct{})}
		go func() {
			done <- k.exec(ctx, gone, "c", []string{"/bin/sh", "-c", "echo started; exec sleep 600"}, nil, started, nil, false, nil)
		}()
		select {
		case <-started.ch:
		case err := <-done:
			t.Fatalf("the command did not start: %v", err)
		}
		podCancel()
		select {
		case err := <-done:
			var ee utilexec.ExitError
			require.True(t, errors.As(err, &ee), "got %v", err)
			assert.Equal(t, 137, ee.ExitStatus(), "killed")
		case <-time.After(20 * time.Second):
			t.Fatal("the exec outlived its pod")
		}
	})

	now, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, hostHostname, now, "the host's hostname")
	after, err := os.ReadFile("/etc/resolv.conf")
	require.NoError(t, err)
	assert.Equal(t, string(hostResolv), string(after), "the host's resolv.conf")
	assert.NoFileExists(t, "/agnhost", "nothing made on the host's disk")
	mountsAfter, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(mountsAfter), k.execRoot, "no mount reached the host's namespace")
	// Other tests (other packages, run at once) add and remove network namespaces, each a
	// mount under /run/netns: only the others count.
	for _, l := range strings.Split(string(mountsAfter), "\n") {
		if !strings.Contains(string(mountsBefore), l) && !strings.Contains(l, " /run/netns/") {
			t.Errorf("a mount reached the host's namespace: %s", l)
		}
	}
}
