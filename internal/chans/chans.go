// Package chans holds the one way kpbench's event consumers (the proxy agent, the lab's
// kubelets, the control plane's publisher) take their events.
package chans

import (
	"context"
	"iter"
)

// Each yields the values of ch, in order, until ch is closed or ctx ends: either way the
// consumer is done.
func Each[T any](ctx context.Context, ch <-chan T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for {
			select {
			case <-ctx.Done():
				return
			case v, ok := <-ch:
				if !ok || !yield(v) {
					return
				}
			}
		}
	}
}
