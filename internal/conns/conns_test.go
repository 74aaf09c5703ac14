package conns

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
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
