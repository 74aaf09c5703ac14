//go:build linux

package controlplane_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
	"kpbench.dev/kpbench/kubestack/controlplane"
	"kpbench.dev/kpbench/lab"
)

// TestControllersAndForward: with Controllers, the controller manager and the scheduler
// run and do their work (the service-account controller makes default/default), the
// loopback forward carries an admin client from the host's namespace, and a kubelet's
// identity is limited to its own node. Stop leaves no listener behind.
func TestControllersAndForward(t *testing.T) {
	testutil.RequireRoot(t)
	upstreamtest.Require(t, upstream.Etcd, upstream.KubeAPIServer, upstream.KubeControllerManager, upstream.KubeScheduler)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Config{Name: "t" + testutil.RandomID(t, 6), Nodes: 1})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Down(context.Background())) })
	cp, err := controlplane.Start(ctx, l, controlplane.Options{Controllers: true, Dir: t.TempDir()})
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			assert.NoError(t, cp.Stop(context.Background()))
		}
	})
	assert.Positive(t, cp.ControllersStartup)
	rss, err := cp.RSS()
	require.NoError(t, err)
	assert.Positive(t, rss.ControllerManager)
	assert.Positive(t, rss.Scheduler)
	assert.Len(t, cp.PIDs(), 4)

	fw, err := cp.ForwardLoopback(0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, fw.Close()) })
	assert.Equal(t, "127.0.0.1", fw.Addr().Addr().String())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, cp.WriteAdminKubeconfig(path, fw.Server()))
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	admin, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, 2*time.Minute, 200*time.Millisecond, "the service-account controller made default/default")

	// A kubelet may create its own Node, not another's.
	kcfg, err := cp.KubeletRESTConfig("node-0")
	require.NoError(t, err)
	kcfg.Dial = (&net.Dialer{}).DialContext
	kcfg.Host = fw.Server() // from the host's namespace, through the forward
	kubelet, err := kubernetes.NewForConfig(kcfg)
	require.NoError(t, err)
	_, err = kubelet.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kubelet.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-9"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "NodeRestriction: %v", err)
	_, err = cp.KubeletRESTConfig("node-9")
	assert.ErrorContains(t, err, "not a node")

	require.NoError(t, fw.Close())
	_, err = net.DialTimeout("tcp", fw.Addr().String(), time.Second)
	require.Error(t, err, "nothing listens after Close")
	stopped = true
	require.NoError(t, cp.Stop(context.Background()))
	for name, pid := range cp.PIDs() {
		assert.False(t, lab.ProcessAlive(pid), "%s (pid %d) still runs", name, pid)
	}
}
