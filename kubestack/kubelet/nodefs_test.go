//go:build linux

package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeFSBytes(t *testing.T) {
	dir := t.TempDir()
	got, err := nodeFSBytes(dir)
	require.NoError(t, err)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	assert.Equal(t, int64(st.Blocks)*fsUnit(&st), got)
	assert.Positive(t, got)
	_, err = nodeFSBytes(dir + "/missing")
	assert.Error(t, err)
}

// TestNodeStatusEphemeralStorage: the Node a lab kubelet registers reports the size of
// the filesystem of its state directory as ephemeral-storage capacity and allocatable.
func TestNodeStatusEphemeralStorage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, client, node := labKubelet(t, ctx, "")
	want, err := nodeFSBytes(k.opts.StateDir)
	require.NoError(t, err)
	n, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for name, list := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
		q, ok := list[corev1.ResourceEphemeralStorage]
		if assert.True(t, ok, "%s has no ephemeral-storage", name) {
			assert.Equal(t, want, q.Value(), name)
		}
	}
}
