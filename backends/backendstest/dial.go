//go:build linux

package backendstest

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
)

// DialTimeout bounds a connect and the read of the answer in Dial.
const DialTimeout = 3 * time.Second

// Serve listens on TCP addr inside the namespace at nsPath (the socket stays there) and
// answers every connection with answer, then closes it; the listener is closed at the
// end of the test.
func Serve(t testing.TB, nsPath, addr, answer string) {
	t.Helper()
	var ln net.Listener
	require.NoError(t, netns.Do(nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}))
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, answer)
			_ = c.Close()
		}
	}()
}

// Dial connects to TCP addr from inside the namespace at nsPath (refusing to send from the
// host's namespace: netns.Guard) and returns what the server sent before closing. Connect
// and read are bounded by DialTimeout; a refused connection is an error wrapping
// syscall.ECONNREFUSED.
func Dial(nsPath, addr string) (string, error) {
	var got string
	err := netns.Do(nsPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", addr, DialTimeout)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(DialTimeout))
		data, err := io.ReadAll(c)
		got = string(data)
		return err
	})
	return got, err
}

// SendUDP sends one datagram to addr from inside the namespace at nsPath (guarded).
func SendUDP(nsPath, addr string, payload []byte) error {
	return netns.Do(nsPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	})
}
