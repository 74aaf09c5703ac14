//go:build linux

package kubelet

import (
	"kpbench.dev/kpbench/internal/upstream"

	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestStorageEviction(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	tests := []struct {
		name     string
		podLimit *resource.Quantity
		cs       []containerStorage
		want     string
	}{
		{name: "under the limit", podLimit: q("5Mi"), cs: []containerStorage{{name: "c", limit: q("5Mi"), used: 1 << 20}}},
		{name: "at the limit", podLimit: q("5Mi"), cs: []containerStorage{{name: "c", limit: q("5Mi"), used: 5 << 20}}},
		{name: "one container over: the pod's total is checked first", podLimit: q("5Mi"),
			cs:   []containerStorage{{name: "c", limit: q("5Mi"), used: 10 << 20}},
			want: "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "},
		{name: "the pods' total under, one container over its own", podLimit: q("10Mi"),
			cs:   []containerStorage{{name: "a", limit: q("2Mi"), used: 3 << 20}, {name: "b", limit: q("8Mi")}},
			want: `Container a exceeded its local ephemeral storage limit "2Mi". `},
		{name: "no limit", cs: []containerStorage{{name: "c", used: 1 << 30}}},
		{name: "a zero container limit is none", podLimit: q("1Gi"), cs: []containerStorage{{name: "c", limit: q("0"), used: 1 << 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, storageEviction(tt.podLimit, tt.cs))
		})
	}
}

func TestPodStorageLimit(t *testing.T) {
	c := func(limit string) corev1.Container {
		if limit == "" {
			return corev1.Container{}
		}
		return corev1.Container{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}}}
	}
	always := corev1.ContainerRestartPolicyAlways
	sidecar := c("1Mi")
	sidecar.RestartPolicy = &always
	tests := []struct {
		name  string
		spec  corev1.PodSpec
		want  string
		found bool
	}{
		{name: "none", spec: corev1.PodSpec{Containers: []corev1.Container{c("")}}},
		{name: "one", spec: corev1.PodSpec{Containers: []corev1.Container{c("5Mi")}}, want: "5Mi", found: true},
		{name: "summed, an unlimited container adds nothing", spec: corev1.PodSpec{Containers: []corev1.Container{c("5Mi"), c("3Mi"), c("")}}, want: "8Mi", found: true},
		{name: "sidecars add up", spec: corev1.PodSpec{InitContainers: []corev1.Container{sidecar}, Containers: []corev1.Container{c("5Mi")}}, want: "6Mi", found: true},
		{name: "a larger init container wins", spec: corev1.PodSpec{InitContainers: []corev1.Container{sidecar, c("9Mi")}, Containers: []corev1.Container{c("5Mi")}}, want: "10Mi", found: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := podStorageLimit(&corev1.Pod{Spec: tt.spec})
			assert.Equal(t, tt.found, found)
			if tt.found {
				assert.Equal(t, tt.want, got.String())
			}
		})
	}
}

// TestEphemeralStorageEviction runs the upstream e2e test's writer ("should be rejected
// for evicted pods"): an agnhost container whose shell writes a file in its working
// directory, with a 5Mi ephemeral-storage limit. Writing 10 MiB gets the pod evicted
// (Failed, reason Evicted, the kubelet's message, an Evicted event; the Pod stays);
// writing 1 MiB does not.
func TestEphemeralStorageEviction(t *testing.T) {
	bin := requireAgnhost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, client, node := labKubelet(t, ctx, bin)
	pod := func(name string, mib int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{
				Name: name, Image: upstream.AgnhostImage,
				Command:   []string{"/bin/sh", "-c", "dd if=/dev/urandom of=file bs=1M count=" + strconv.Itoa(mib) + "; sleep 10000"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("5Mi")}},
			}}},
		}
	}
	small, big := pod("writes-1mi", 1), pod("writes-10mi", 10)
	for _, p := range []*corev1.Pod{small, big} {
		_, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() { dumpOnFailure(t, ctx, client, k, big); dumpOnFailure(t, ctx, client, k, small) })

	evicted := waitPod(t, ctx, client, big.Namespace, big.Name, "evicted", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, ReasonEvicted, evicted.Status.Reason)
	if r := k.storageReading(big.UID); assert.NotNil(t, r) {
		assert.True(t, r.evicted)
		assert.Greater(t, r.used, int64(5<<20), "evicted for what it wrote, not before")
	}
	assert.Equal(t, "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. ", evicted.Status.Message)
	for _, c := range evicted.Status.Conditions {
		assert.NotEqual(t, corev1.DisruptionTarget, c.Type, "a kubelet sets no DisruptionTarget for a limit it enforces")
	}
	require.Len(t, evicted.Status.ContainerStatuses, 1)
	assert.NotNil(t, evicted.Status.ContainerStatuses[0].State.Terminated, "its container was stopped")
	require.Eventually(t, func() bool {
		events, err := client.CoreV1().Events(big.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == big.Name && e.Type == corev1.EventTypeWarning && e.Reason == ReasonEvicted && e.Message == evicted.Status.Message {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "an Evicted event")

	// A check read the small writer's whole file (1 MiB) and left it running.
	require.Eventually(t, func() bool {
		r := k.storageReading(small.UID)
		return r != nil && r.used >= 1<<20 && !r.evicted
	}, time.Minute, 100*time.Millisecond, "a check of the 1 MiB writer's usage")
	p, err := client.CoreV1().Pods(small.Namespace).Get(ctx, small.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "1 MiB is within 5Mi")
	assert.Empty(t, p.Status.Reason)
	// The evicted Pod stays, as with a kubelet, until someone deletes it.
	_, err = client.CoreV1().Pods(big.Namespace).Get(ctx, big.Name, metav1.GetOptions{})
	assert.NoError(t, err)
}

// storageReading is the last ephemeral-storage check of a pod the kubelet runs (nil when
// none was made or the pod's worker is gone).
func (k *Kubelet) storageReading(uid types.UID) *storageReading {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w := k.pods[uid]; w != nil {
		return w.storageUsed.Load()
	}
	return nil
}
