//go:build linux

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"kpbench.dev/kpbench/internal/conns"
	"kpbench.dev/kpbench/internal/netns"
)

// Forward relays TCP connections from a port on 127.0.0.1 of the host's namespace to the
// API server inside the lab: each accepted connection gets an upstream connection made
// from inside the control-plane namespace, and bytes are copied both ways until either side
// closes. TLS passes through untouched (the API server's certificate names 127.0.0.1). It
// is the only listener kpbench opens in the host's namespace, and it adds no route there.
type Forward struct {
	cp       *ControlPlane
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup

	conns conns.Set

	closeOnce sync.Once
}

// ForwardLoopback listens on 127.0.0.1:port (0: a free port the kernel picks) in the
// namespace kpbench started in, and relays to the API server until Close.
//
// Equivalent to: `socat TCP-LISTEN:$port,bind=127.0.0.1,fork EXEC:'ip netns exec $cp socat - TCP:$apiserver'`.
func (cp *ControlPlane) ForwardLoopback(port int) (*Forward, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("forward to the API server: port %d is not in 0-65535", port)
	}
	f := &Forward{cp: cp, upstream: netip.AddrPortFrom(cp.IP, Port).String()}
	// The listener must be made in the host's namespace and nowhere else: on a thread of
	// its own that checks where it is (an unlocked thread never stays in a lab namespace,
	// see internal/netns; this makes sure).
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if !netns.InRootNamespace() {
			errc <- errors.New("forward to the API server: this thread is not in the host's namespace")
			return
		}
		var err error
		f.ln, err = net.Listen("tcp4", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)).String())
		errc <- err
	}()
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("forward to the API server: listen on 127.0.0.1:%d: %w", port, err)
	}
	f.conns.Serve(f.ln, &f.wg, f.relay)
	return f, nil
}

// Addr returns the loopback address the forward listens on.
func (f *Forward) Addr() netip.AddrPort { return f.ln.Addr().(*net.TCPAddr).AddrPort() }

// Server returns the URL clients use: https://127.0.0.1:PORT.
func (f *Forward) Server() string { return "https://" + f.Addr().String() }

// relay copies between a client and a new upstream connection to the API server.
func (f *Forward) relay(client net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := f.cp.dial(ctx, "tcp", f.upstream)
	cancel()
	if err != nil {
		return // the client sees the connection close: the API server is unreachable
	}
	if !f.conns.Add(up) {
		return
	}
	defer f.conns.Remove(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // pass the half-close on
		}
		done <- struct{}{}
	}
	go pipe(up, client)
	go pipe(client, up)
	<-done
	<-done
}

// Close stops listening, closes every relayed connection and waits for the relays.
// It is idempotent.
func (f *Forward) Close() error {
	var err error
	f.closeOnce.Do(func() {
		err = f.ln.Close()
		f.conns.Close(false)
	})
	f.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close the forward on %s: %w", f.ln.Addr(), err)
	}
	return nil
}
