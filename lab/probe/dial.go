//go:build linux

package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab/echo"
)

// mode is what a probe does once connected.
type mode int

const (
	// modeRequest sends the payload and reads the answer.
	modeRequest mode = iota
	// modeConnect only connects (TCP).
	modeConnect
)

// dialer creates probe sockets on the calling thread.
type dialer struct {
	// control, when set, is called for every socket created, before it connects; tests
	// use it to count sockets.
	control func(network, address string, c syscall.RawConn) error
}

// dial checks the thread's namespace and connects a socket to target on the calling thread,
// which the caller has locked. It returns the connect latency.
func (d dialer) dial(ctx context.Context, t Destination, o Options) (net.Conn, time.Duration, error) {
	if err := netns.Guard(); err != nil {
		return nil, 0, err
	}
	if !t.Addr.IsValid() || t.Addr.Port() == 0 {
		return nil, 0, fmt.Errorf("invalid target address %q", t.Addr)
	}
	addr := netip.AddrPortFrom(t.Addr.Addr().Unmap(), t.Addr.Port())
	family := "4"
	if addr.Addr().Is6() {
		family = "6"
	}
	nd := net.Dialer{Control: d.control}
	var network string
	switch t.Protocol {
	case echo.TCP:
		network = "tcp" + family
		if o.SourcePort != 0 {
			nd.LocalAddr = &net.TCPAddr{Port: int(o.SourcePort)}
			// Allow a fixed source port again while an earlier connection from it lingers.
			nd.Control = func(network, address string, c syscall.RawConn) error {
				var serr error
				if err := c.Control(func(fd uintptr) {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
				}); err != nil {
					return err
				}
				if serr != nil {
					return fmt.Errorf("SO_REUSEADDR: %w", serr)
				}
				if d.control != nil {
					return d.control(network, address, c)
				}
				return nil
			}
		}
	case echo.UDP:
		network = "udp" + family
		if o.SourcePort != 0 {
			nd.LocalAddr = &net.UDPAddr{Port: int(o.SourcePort)}
		}
	default:
		return nil, 0, fmt.Errorf("protocol %q: want TCP or UDP", t.Protocol)
	}
	start := time.Now()
	c, err := nd.DialContext(ctx, network, addr.String())
	connect := time.Since(start)
	if err != nil {
		return nil, connect, err
	}
	return c, connect, nil
}

// probeWith runs one probe, connecting with dial (which bounds connecting by o's timeout
// and refuses the host's root namespace).
func probeWith(ctx context.Context, dial func(context.Context, Destination, Options) (net.Conn, time.Duration, error), t Destination, o Options, m mode) Result {
	ctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	if m == modeConnect && t.Protocol != echo.TCP {
		return Result{}.fail(fmt.Errorf("probe %s: connect-only probes need TCP", t))
	}
	c, connect, err := dial(ctx, t, o)
	return finish(ctx, c, connect, err, t, o, m)
}

// finish completes a probe whose socket dial made (c, or err): it sends the request and
// reads the answer (modeRequest), and closes c. This needs no namespace: the socket already
// lives in its own. ctx carries the probe's deadline.
func finish(ctx context.Context, c net.Conn, connect time.Duration, err error, t Destination, o Options, m mode) Result {
	var res Result
	if err != nil {
		return res.fail(fmt.Errorf("probe %s: connect: %w", t, err))
	}
	res.Local = localAddr(c)
	if t.Protocol == echo.TCP {
		res.Connect = connect
		defer closeRST(c)
	} else {
		defer c.Close()
	}
	if m == modeConnect {
		res.Total = connect
		return res
	}
	start := time.Now().Add(-res.Connect)
	stop := abortOnDone(ctx, c)
	defer stop()
	a, err := exchange(ctx, c, bufio.NewReaderSize(c, echo.MaxLineLength), t.Protocol, o.payload(t.Protocol))
	res.Total = time.Since(start)
	if err != nil {
		return res.fail(fmt.Errorf("probe %s from %s: %w", t, res.Local, err))
	}
	res.Answer = a
	return res
}

// exchange sends payload over c and reads one answer within the deadline of ctx. For TCP,
// br reads c.
func exchange(ctx context.Context, c net.Conn, br *bufio.Reader, p echo.Protocol, payload []byte) (echo.Answer, error) {
	if dl, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(dl); err != nil {
			return echo.Answer{}, err
		}
	}
	if _, err := c.Write(payload); err != nil {
		return echo.Answer{}, fmt.Errorf("send: %w", err)
	}
	var line []byte
	if p == echo.UDP {
		buf := make([]byte, echo.MaxLineLength+1)
		n, err := c.Read(buf)
		if err != nil {
			return echo.Answer{}, fmt.Errorf("read answer: %w", err)
		}
		line = buf[:n]
	} else {
		var err error
		line, err = br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return echo.Answer{}, fmt.Errorf("read answer: line longer than %d bytes", echo.MaxLineLength)
		}
		if err != nil {
			return echo.Answer{}, fmt.Errorf("read answer: %w", err)
		}
	}
	a, err := echo.ParseAnswer(string(line))
	if err != nil {
		return echo.Answer{}, err
	}
	return a, nil
}

// abortOnDone makes pending I/O on c fail when ctx is cancelled before its deadline. The
// returned function stops watching.
func abortOnDone(ctx context.Context, c net.Conn) func() bool {
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
}

// closeRST closes a TCP connection with SO_LINGER 0: the kernel sends a RST and keeps no
// TIME_WAIT socket (see the package documentation).
func closeRST(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// localAddr returns the local address of c, unmapped.
func localAddr(c net.Conn) netip.AddrPort {
	var ap netip.AddrPort
	switch a := c.LocalAddr().(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Conn is an established probe connection (TCP, or a connected UDP socket) that sends one
// request per Request call: the established-connection latency control, free of connect and
// lookup costs. A Conn is not safe for concurrent use.
type Conn struct {
	c       net.Conn
	br      *bufio.Reader
	target  Destination
	opts    Options
	connect time.Duration
	local   netip.AddrPort
}

// Connect returns the connect latency measured when the connection was made (zero for UDP).
func (c *Conn) Connect() time.Duration { return c.connect }

// Local returns the connection's source address and port.
func (c *Conn) Local() netip.AddrPort { return c.local }

// Request sends one more payload over the connection and reads the answer. Result.Connect
// is zero; Result.Total is the request latency. The connection's timeout applies to each
// request.
func (c *Conn) Request(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout())
	defer cancel()
	res := Result{Local: c.local}
	stop := abortOnDone(ctx, c.c)
	defer stop()
	start := time.Now()
	a, err := exchange(ctx, c.c, c.br, c.target.Protocol, c.opts.payload(c.target.Protocol))
	res.Total = time.Since(start)
	if err != nil {
		return res.fail(fmt.Errorf("probe %s from %s: %w", c.target, c.local, err))
	}
	res.Answer = a
	return res
}

// Close closes the connection (with a RST for TCP, see the package documentation).
func (c *Conn) Close() error {
	if c.target.Protocol == echo.TCP {
		closeRST(c.c)
		return nil
	}
	if err := c.c.Close(); err != nil {
		return fmt.Errorf("close probe %s: %w", c.target, err)
	}
	return nil
}
