package apistore

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// EventType says what happened to an object.
type EventType string

// The event types. Synced is not about an object: it marks the end of the initial snapshot,
// like an informer's HasSynced.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Synced   EventType = "SYNCED"
)

// Event is one change of the store, as a watch delivers it.
type Event struct {
	// Type is what happened.
	Type EventType
	// Kind, Namespace and Name identify the object (empty for Synced).
	Kind            Kind
	Namespace, Name string
	// Object is the object after the change (for Deleted: its last state). Each subscriber
	// receives its own deep copy and may modify it. Nil for Synced.
	Object runtime.Object
	// ResourceVersion is the store's version at this change (for Synced: the version of the
	// snapshot). It increases strictly from one change to the next.
	ResourceVersion uint64
}

// subscriber is one Watch: an unbounded queue between the store and a consumer goroutine.
type subscriber struct {
	mu    sync.Mutex
	queue []Event       // objects are shared stored pointers, copied on delivery
	wake  chan struct{} // capacity 1: "the queue is not empty"
}

func (s *subscriber) push(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	s.mu.Lock()
	s.queue = append(s.queue, evs...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Watch subscribes to the store's changes. The channel first delivers an Added event for
// every current object (Deployments, Pods, Services, EndpointSlices, each kind sorted by
// namespace and name), then one Synced event, then every change in the order it was
// committed; a failed Apply sends nothing. The channel is closed when ctx is done.
//
// The store never waits for a consumer: each subscriber has an unbounded queue, filled
// under the store lock and drained by the subscriber's own goroutine, so a slow consumer
// costs memory (one entry per change, objects shared until delivered) but never blocks
// Apply. Objects are deep-copied as they are delivered.
func (c *Store) Watch(ctx context.Context) (<-chan Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	s := &subscriber{wake: make(chan struct{}, 1)}
	out := make(chan Event)
	c.mu.Lock()
	for _, k := range kinds {
		for _, key := range sortedKeys(c.objs[k]) {
			o := c.objs[k][key]
			s.queue = append(s.queue, Event{Type: Added, Kind: k, Namespace: key.ns, Name: key.name,
				Object: o, ResourceVersion: rvOf(o)})
		}
	}
	s.queue = append(s.queue, Event{Type: Synced, ResourceVersion: c.cnt.rv})
	s.wake <- struct{}{}
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	go func() {
		defer close(out)
		defer func() {
			c.mu.Lock()
			delete(c.subs, s)
			c.mu.Unlock()
		}()
		s.run(ctx, out)
	}()
	return out, nil
}

// run delivers queued events until ctx is done.
func (s *subscriber) run(ctx context.Context, out chan<- Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for i := range batch {
			ev := batch[i]
			batch[i] = Event{} // let delivered objects go
			if ev.Object != nil {
				ev.Object = ev.Object.DeepCopyObject()
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

// publish hands committed events to every subscriber (called with c.mu held).
func (c *Store) publish(evs []Event) {
	for s := range c.subs {
		s.push(evs...)
	}
}

// rvOf returns a stored object's resourceVersion as a number.
func rvOf(o object) uint64 {
	var v uint64
	_, _ = fmt.Sscan(o.GetResourceVersion(), &v)
	return v
}
