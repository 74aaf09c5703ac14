// Package conns holds the live connections of a server (the lab's echo servers, the
// userspace proxy, the API server forward) so that its Close can close every one of them:
// a connection accepted while the server closes is refused rather than left open. Serve is
// the accept loop they share.
package conns

import (
	"errors"
	"net"
	"sync"
	"time"
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

// Serve accepts connections from ln until ln is closed, on a goroutine counted in wg, and
// runs handle on each accepted one, on a goroutine of its own also counted in wg, with the
// connection in s until handle returns (then it is closed). A server's Close thus closes ln,
// calls s.Close and waits for wg. An accept error other than a closed listener (out of
// file descriptors or memory) is retried after a pause that doubles from 5 ms up to 1 s, as
// net/http does.
func (s *Set) Serve(ln net.Listener, wg *sync.WaitGroup, handle func(net.Conn)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		backoff := 5 * time.Millisecond
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(backoff)
				backoff = min(2*backoff, time.Second)
				continue
			}
			backoff = 5 * time.Millisecond
			if !s.Add(c) {
				return
			}
			wg.Add(1) // this goroutine holds one: the Add cannot race a Wait that saw zero
			go func() {
				defer wg.Done()
				defer s.Remove(c)
				handle(c)
			}()
		}
	}()
}
