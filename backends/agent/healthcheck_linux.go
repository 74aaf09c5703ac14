//go:build linux

package agent

import (
	"context"
	"fmt"
	"net"

	"kpbench.dev/kpbench/internal/netns"
)

// NetNSListen returns a ListenFunc that opens its listeners inside the network namespace at
// nsPath (a lab node): the socket is made on a thread inside that namespace and keeps it,
// and it refuses (netns.ErrRootNamespace) when nsPath turns out to be the host's root
// namespace, where nothing of kpbench may listen.
//
// Equivalent to: `ip netns exec $ns <server listening on $address>`.
func NetNSListen(nsPath string) ListenFunc {
	return func(ctx context.Context, address string) (net.Listener, error) {
		var ln net.Listener
		err := netns.Do(nsPath, func() error {
			if err := netns.Guard(); err != nil {
				return err
			}
			var err error
			ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp4", address)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("listen on %s in %s: %w", address, nsPath, err)
		}
		return ln, nil
	}
}
