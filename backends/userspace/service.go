//go:build linux

package userspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/internal/conns"
)

// service is the proxy of one service port: its listener, endpoint picker, and the
// connections or UDP sessions it serves.
type service struct {
	b      *Backend
	dialer *dialer
	name   backends.ServicePortName
	ctx    context.Context
	cancel context.CancelFunc
	picker *picker

	// sp and action are written by Sync only (under Backend.mu).
	sp     *backends.ServicePort
	action Action
	port   uint16
	ln     net.Listener
	pc     *net.UDPConn

	wg       sync.WaitGroup
	mu       sync.Mutex
	closed   bool
	conns    conns.Set
	sessions map[netip.AddrPort]*udpSession
}

// newService returns the proxy of sp, not yet listening.
func (b *Backend) newService(sp *backends.ServicePort) *service {
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{
		b: b, dialer: b.dialer, name: sp.Name, ctx: ctx, cancel: cancel, picker: newPicker(b.now),
		sessions: map[netip.AddrPort]*udpSession{},
	}
	s.update(sp)
	return s
}

// update takes the new endpoints and affinity of the service port (in place: open
// connections stay, new ones use the new endpoints).
func (s *service) update(sp *backends.ServicePort) {
	cp := *sp
	s.sp = &cp
	eps, action := endpointsOf(sp)
	ttl := DefaultAffinityTimeout
	if sp.AffinityTimeoutSeconds > 0 {
		ttl = time.Duration(sp.AffinityTimeoutSeconds) * time.Second
	}
	s.action = action
	s.picker.update(eps, sp.AffinityClientIP, ttl)
	s.closeStaleSessions(eps)
}

// closeStaleSessions ends the UDP sessions whose endpoint is no longer among eps, so that
// the client's next datagram picks a live endpoint. A client that keeps sending never lets
// its session idle out: without this, it would send to a removed pod forever (the
// userspace twin of the kernel modes' stale UDP conntrack entries (kube-proxy deletes
// those)). Closing the session's socket ends its reply loop.
func (s *service) closeStaleSessions(eps []netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for client, u := range s.sessions {
		if !slices.Contains(eps, u.endpoint) {
			delete(s.sessions, client) // the next datagram makes a new session at once
			_ = u.conn.Close()
		}
	}
}

// endpointsOf returns the endpoints the proxy of sp uses and what the rules do. The proxy
// cannot tell how traffic entered, so it uses the cluster-wide endpoints when the port has a
// Cluster path, else the local ones.
func endpointsOf(sp *backends.ServicePort) ([]netip.AddrPort, Action) {
	c := backends.CategorizeEndpoints(sp)
	eps := c.Cluster
	if eps == nil {
		eps = c.Local
	}
	out := make([]netip.AddrPort, 0, len(eps))
	for _, ep := range eps {
		out = append(out, ep.AddrPort())
	}
	switch {
	case len(out) > 0:
		return out, Redirect
	case c.HasAnyEndpoints:
		return out, Drop
	default:
		return out, Reject
	}
}

// listen opens the listener; it runs on a thread inside the node namespace.
//
// Equivalent to: `ip netns exec $node socat TCP-LISTEN:0 ...` (or UDP-RECVFROM).
func (s *service) listen() error {
	switch s.name.Protocol {
	case backends.TCP:
		ln, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			return fmt.Errorf("listen for %s: %w", s.name, err)
		}
		s.ln = ln
		s.port = uint16(ln.Addr().(*net.TCPAddr).Port)
	case backends.UDP:
		pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
		if err != nil {
			return fmt.Errorf("listen for %s: %w", s.name, err)
		}
		s.pc = pc
		s.port = uint16(pc.LocalAddr().(*net.UDPAddr).Port)
	}
	return nil
}

// serve starts serving the listener.
func (s *service) serve() {
	if s.ln != nil {
		s.conns.Serve(s.ln, &s.wg, s.handleTCP)
	} else {
		s.wg.Add(1)
		go s.packetLoop()
	}
}

// close stops the listener, closes every connection and session of the service, and waits
// for its goroutines.
func (s *service) close() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	if s.ln != nil {
		_ = s.ln.Close()
	}
	if s.pc != nil {
		_ = s.pc.Close()
	}
	for _, u := range s.sessions {
		_ = u.conn.Close()
	}
	s.mu.Unlock()
	s.conns.Close(false)
	s.wg.Wait()
}

// handleTCP connects an accepted client to an endpoint and copies bytes both ways.
func (s *service) handleTCP(client net.Conn) {
	up := s.connect(client.RemoteAddr())
	if up == nil {
		return // no endpoint answered: the client sees its connection closed
	}
	if !s.conns.Add(up) {
		return
	}
	defer s.conns.Remove(up)
	splice(client.(*net.TCPConn), up.(*net.TCPConn), s.b.opts.TCPIdleTimeout)
}

// connect dials an endpoint for a client, one attempt per DialTimeouts entry, each on the
// next endpoint (with affinity, the retries reset the client's entry), as kube-proxy's
// userspace TCP proxy did. It returns nil when every attempt failed.
func (s *service) connect(remote net.Addr) net.Conn {
	client := addrOf(remote)
	for i, timeout := range s.b.opts.DialTimeouts {
		ep, ok := s.picker.pick(client, i > 0)
		if !ok {
			return nil
		}
		up, err := s.dialer.dial(s.ctx, "tcp4", ep, timeout)
		if err == nil {
			return up
		}
		if s.ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// addrOf returns the IP of a socket address.
func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// splice copies bytes between a and b in both directions. When one side finishes sending
// (EOF), the other side's write half is closed and the other direction goes on; an error in
// either direction, or idle without traffic in both directions, ends both.
func splice(a, b *net.TCPConn, idle time.Duration) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyHalf(b, a, idle, &last)
	}()
	copyHalf(a, b, idle, &last)
	<-done
}

// copyHalf copies src to dst until EOF (then closes dst's write half), an error, or idle
// without traffic in either direction (last holds the time of the latest traffic). On an
// error both connections are closed, which ends the other direction too.
func copyHalf(dst, src *net.TCPConn, idle time.Duration, last *atomic.Int64) {
	buf := make([]byte, 32*1024)
	for {
		deadline := time.Unix(0, last.Load()).Add(idle)
		_ = src.SetReadDeadline(deadline)
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			_ = dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				abort(dst, src)
				return
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			_ = dst.CloseWrite()
			return
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, last.Load())) < idle:
			// the other direction had traffic: keep waiting
		default:
			abort(dst, src)
			return
		}
	}
}

// abort closes both connections.
func abort(a, b net.Conn) {
	_ = a.Close()
	_ = b.Close()
}

// udpSession is one UDP client of a service: a socket connected to its endpoint, and the
// time of its latest traffic.
type udpSession struct {
	client   netip.AddrPort
	endpoint netip.AddrPort
	conn     net.Conn
	last     atomic.Int64
}

// packetLoop reads client datagrams and forwards each to its client's session.
func (s *service) packetLoop() {
	defer s.wg.Done()
	buf := make([]byte, 64*1024)
	for {
		n, client, err := s.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. an ICMP error reported on the socket
		}
		client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
		u := s.session(client)
		if u == nil {
			if s.ctx.Err() != nil {
				return
			}
			continue // no endpoint: the datagram is dropped
		}
		u.last.Store(time.Now().UnixNano())
		s.picker.touch(client.Addr())
		_, _ = u.conn.Write(buf[:n])
	}
}

// session returns the session of client, dialing a new one when needed (nil when there is
// no endpoint or the service is closing).
func (s *service) session(client netip.AddrPort) *udpSession {
	s.mu.Lock()
	u := s.sessions[client]
	s.mu.Unlock()
	if u != nil {
		return u
	}
	ep, ok := s.picker.pick(client.Addr(), false)
	if !ok {
		return nil
	}
	c, err := s.dialer.dial(s.ctx, "udp4", ep, s.b.opts.DialTimeouts[0])
	if err != nil {
		return nil
	}
	u = &udpSession{client: client, endpoint: ep, conn: c}
	u.last.Store(time.Now().UnixNano())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return nil
	}
	s.sessions[client] = u
	s.wg.Add(1)
	s.mu.Unlock()
	go s.replyLoop(u)
	return u
}

// replyLoop sends the endpoint's datagrams back to the client from the service socket, until
// the session was idle for UDPIdleTimeout or the service closes.
func (s *service) replyLoop(u *udpSession) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		if s.sessions[u.client] == u {
			delete(s.sessions, u.client)
		}
		s.mu.Unlock()
		_ = u.conn.Close()
	}()
	idle := s.b.opts.UDPIdleTimeout
	buf := make([]byte, 64*1024)
	for {
		_ = u.conn.SetReadDeadline(time.Unix(0, u.last.Load()).Add(idle))
		n, err := u.conn.Read(buf)
		if n > 0 {
			u.last.Store(time.Now().UnixNano())
			if _, werr := s.pc.WriteToUDPAddrPort(buf[:n], u.client); werr != nil && errors.Is(werr, net.ErrClosed) {
				return
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, u.last.Load())) < idle {
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
				return
			}
			// ECONNREFUSED from an ICMP port unreachable: the endpoint is gone; end the
			// session so the next datagram picks again.
			return
		}
	}
}
