package apistore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// next reads n events, failing if the channel closes first.
func next(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	out := make([]Event, 0, n)
	for range n {
		ev, ok := <-ch
		require.True(t, ok, "channel closed early")
		out = append(out, ev)
	}
	return out
}

type evSummary struct {
	Type EventType
	Kind Kind
	Name string
}

func summarize(evs []Event) []evSummary {
	var out []evSummary
	for _, e := range evs {
		n := e.Name
		if e.Kind == KindEndpointSlice {
			n = "slice-of-" + e.Object.(interface{ GetLabels() map[string]string }).GetLabels()["kubernetes.io/service-name"]
		}
		out = append(out, evSummary{e.Type, e.Kind, n})
	}
	return out
}

func TestWatchSnapshotThenChanges(t *testing.T) {
	c := newCluster(t, 1)
	require.NoError(t, c.Apply(t.Context(), newSvc("web"), newPod("p", map[string]string{"app": "web"})))
	ch, err := c.Watch(t.Context())
	require.NoError(t, err)
	snap := next(t, ch, 4)
	assert.Equal(t, []evSummary{
		{Added, KindPod, "p"}, {Added, KindService, "web"}, {Added, KindEndpointSlice, "slice-of-web"}, {Synced, "", ""},
	}, summarize(snap))
	assert.Equal(t, c.ResourceVersion(), snap[3].ResourceVersion)
	assert.Equal(t, 1, c.Len(KindService))
	assert.Equal(t, 1, c.Len(KindEndpointSlice))

	runPods(t, c)
	require.NoError(t, c.Delete(t.Context(), KindService, "default", "web"))
	evs := next(t, ch, 4)
	assert.Equal(t, []evSummary{
		{Modified, KindPod, "p"}, {Modified, KindEndpointSlice, "slice-of-web"},
		{Deleted, KindService, "web"}, {Deleted, KindEndpointSlice, "slice-of-web"},
	}, summarize(evs))
	assert.Zero(t, c.Len(KindService))
	last := snap[3].ResourceVersion
	for _, e := range evs {
		assert.Equal(t, last+1, e.ResourceVersion, "versions increase by one per change")
		last = e.ResourceVersion
	}
	assert.Equal(t, "10.244.0.1", evs[0].Object.(*corev1.Pod).Status.PodIP)

	// Objects are each subscriber's own copies.
	evs[0].Object.(*corev1.Pod).Status.PodIP = "1.2.3.4"
	assert.Equal(t, "10.244.0.1", c.Pods()[0].Status.PodIP)
}

func TestWatchSlowConsumerDoesNotBlock(t *testing.T) {
	c := newCluster(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := c.Watch(ctx)
	require.NoError(t, err)
	// Nobody reads while 2,000 services are applied one by one.
	for i := range 2000 {
		require.NoError(t, c.Apply(t.Context(), newSvc("s"+itoa(i))))
	}
	evs := next(t, ch, 1+2*2000)
	assert.Equal(t, Synced, evs[0].Type)
	for i := 1; i < len(evs); i++ {
		require.Equal(t, evs[i-1].ResourceVersion+1, evs[i].ResourceVersion, "event %d in order", i)
	}
	cancel()
	for range ch { // drain until closed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.subs, "a cancelled watch unsubscribes")
}

func TestWatchCancelledContext(t *testing.T) {
	c := newCluster(t, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Watch(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, c.Apply(ctx, newSvc("a")), context.Canceled)
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}
