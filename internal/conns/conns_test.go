package conns

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closed reports whether the pipe end c has been closed.
func closed(c net.Conn) bool {
	_, err := c.Write([]byte{0})
	return errors.Is(err, io.ErrClosedPipe)
}

func TestSet(t *testing.T) {
	var s Set
	a, peerA := net.Pipe()
	b, peerB := net.Pipe()
	defer peerA.Close()
	defer peerB.Close()

	assert.True(t, s.Add(a))
	assert.True(t, s.Add(b))
	s.Remove(a)
	assert.True(t, closed(a), "Remove closes")
	s.Close(false)
	assert.True(t, closed(b), "Close closes what is still open")

	c, peerC := net.Pipe()
	defer peerC.Close()
	assert.False(t, s.Add(c), "a closed set refuses")
	assert.True(t, closed(c), "and closes what it refuses")
	s.Close(true) // idempotent
}

// pipeListener hands out the server ends of net.Pipe pairs.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// dial returns the client end of a new connection to l.
func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	l.conns <- server
	return client
}

func TestServe(t *testing.T) {
	var s Set
	var wg sync.WaitGroup
	ln := newPipeListener()
	hold := make(chan struct{})
	s.Serve(ln, &wg, func(c net.Conn) {
		_, _ = c.Write([]byte("hi"))
		<-hold
	})
	done, held := ln.dial(), ln.dial()
	buf := make([]byte, 2)
	_, err := io.ReadFull(done, buf)
	require.NoError(t, err)
	assert.Equal(t, "hi", string(buf))
	_, err = io.ReadFull(held, buf)
	require.NoError(t, err)

	// Close as a server does: the listener, then the set (which closes the held
	// connection while its handler still runs), then wait.
	require.NoError(t, ln.Close())
	s.Close(false)
	_, err = held.Read(buf)
	assert.ErrorIs(t, err, io.EOF, "Close closes the connections being handled")
	close(hold)
	wg.Wait()
}
