// Package conns holds the live connections of a server (the lab's echo servers, the
// userspace proxy, the API server forward) so that its Close can close every one of them:
// a connection accepted while the server closes is refused rather than left open.
package conns

import (
	"net"
	"sync"
)

// Set is the open connections of one server. The zero value is an empty, open set; it is
// safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// Add registers c for Close, unless the set is closed: then it closes c and returns false.
func (s *Set) Add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

// Remove forgets c and closes it (when its handler is done with it).
func (s *Set) Remove(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

// Close refuses every later Add and closes the connections still open. With reset, a TCP
// connection is reset rather than shut down (SO_LINGER 0), as when a pod dies: a FIN would
// leave an orphan socket in FIN_WAIT that holds its network namespace until the peer
// acknowledges it. Close is idempotent.
func (s *Set) Close(reset bool) {
	s.mu.Lock()
	s.closed = true
	open := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		if tc, ok := c.(*net.TCPConn); reset && ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}
