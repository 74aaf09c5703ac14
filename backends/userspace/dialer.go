//go:build linux

package userspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// dialer connects to endpoints from the node namespace: a pool of internal/netns.Workers, each a
// locked thread inside the namespace, on which net.Dialer creates the socket and waits for
// the handshake. The pool size is the number of connects in flight.
type dialer struct {
	nsPath  string
	idle    chan *netns.Worker
	workers []*netns.Worker
}

// startDialer starts n workers in the namespace at nsPath.
func startDialer(nsPath string, n int) (*dialer, error) {
	d := &dialer{nsPath: nsPath, idle: make(chan *netns.Worker, n)}
	for range n {
		w, err := netns.StartWorker(nsPath)
		if err != nil {
			d.stop()
			return nil, fmt.Errorf("start dialer: %w", err)
		}
		d.workers = append(d.workers, w)
		if err := w.Run(context.Background(), netns.Guard); err != nil {
			d.stop()
			return nil, fmt.Errorf("start dialer: %w", err)
		}
		d.idle <- w
	}
	return d, nil
}

// dial connects to ep over network ("tcp" or "udp") from the node namespace, within timeout
// and ctx. It waits for a free worker first.
func (d *dialer) dial(ctx context.Context, network string, ep netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var w *netns.Worker
	select {
	case w = <-d.idle:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { d.idle <- w }()
	c, err := w.Dial(ctx, &net.Dialer{Timeout: timeout}, network, ep.String())
	if err != nil {
		return nil, fmt.Errorf("dial %s %s from %s: %w", network, ep, d.nsPath, err)
	}
	return c, nil
}

// stop ends every worker (their threads die). No dial may be in flight.
func (d *dialer) stop() {
	for _, w := range d.workers {
		w.Stop()
	}
	d.workers = nil
}
