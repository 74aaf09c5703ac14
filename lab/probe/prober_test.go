//go:build linux

package probe_test

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/lab/probe/probetest"
)

// Ports served in B by the test lab.
const (
	echoPort   = 8080 // echo server, TCP and UDP
	resetPort  = 7000 // accepts, then resets every connection
	closedPort = 9    // nothing listens
)

// lab is a namespace pair with an echo server and a resetting server in B, and a prober
// in A.
type lab struct {
	probetest.Pair
	p *probe.Prober
}

func newLab(t testing.TB, opts ...probe.Option) lab {
	t.Helper()
	pair := probetest.NewPair(t)
	srv, err := echo.Serve(pair.B.Path, echo.Identity{Pod: "web-1", PodIP: pair.B.Addr.String(), Node: "node-b"},
		[]echo.Port{{Number: echoPort, Protocol: echo.TCP}, {Number: echoPort, Protocol: echo.UDP}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	serveReset(t, pair.B.Path)
	p, err := probe.New(pair.A.Path, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return lab{Pair: pair, p: p}
}

// serveReset listens on resetPort in the namespace at nsPath and resets every connection
// as soon as it is accepted.
func serveReset(t testing.TB, nsPath string) {
	t.Helper()
	var l net.Listener
	require.NoError(t, netns.Do(nsPath, func() error {
		var err error
		l, err = net.Listen("tcp", ":7000")
		return err
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
}

func (l lab) target(addr netip.Addr, port uint16, proto echo.Protocol) probe.Destination {
	return probe.Destination{Addr: netip.AddrPortFrom(addr, port), Protocol: proto}
}

func TestRequestClasses(t *testing.T) {
	l := newLab(t)
	const timeout = 500 * time.Millisecond
	tests := []struct {
		name    string
		target  probe.Destination
		connect bool // Prober.Connect instead of Request
		want    []probe.ErrClass
	}{
		{name: "tcp ok", target: l.target(l.B.Addr, echoPort, echo.TCP), want: []probe.ErrClass{probe.OK}},
		{name: "udp ok", target: l.target(l.B.Addr, echoPort, echo.UDP), want: []probe.ErrClass{probe.OK}},
		{name: "tcp connect ok", target: l.target(l.B.Addr, echoPort, echo.TCP), connect: true, want: []probe.ErrClass{probe.OK}},
		{name: "tcp nothing listens", target: l.target(l.B.Addr, closedPort, echo.TCP), want: []probe.ErrClass{probe.Refused}},
		{name: "tcp connect nothing listens", target: l.target(l.B.Addr, closedPort, echo.TCP), connect: true, want: []probe.ErrClass{probe.Refused}},
		{name: "udp nothing listens", target: l.target(l.B.Addr, closedPort, echo.UDP), want: []probe.ErrClass{probe.Refused}},
		{name: "tcp reset after accept", target: l.target(l.B.Addr, resetPort, echo.TCP), want: []probe.ErrClass{probe.Reset}},
		// Nobody has the address: neighbour resolution fails, the SYN is never sent.
		{name: "tcp silent address", target: l.target(l.Silent, echoPort, echo.TCP), want: []probe.ErrClass{probe.Timeout, probe.Unreachable}},
		{name: "udp silent address", target: l.target(l.Silent, echoPort, echo.UDP), want: []probe.ErrClass{probe.Timeout, probe.Unreachable}},
		{name: "tcp no route", target: l.target(l.NoRoute, echoPort, echo.TCP), want: []probe.ErrClass{probe.Unreachable}},
		{name: "udp no route", target: l.target(l.NoRoute, echoPort, echo.UDP), want: []probe.ErrClass{probe.Unreachable}},
		{name: "udp connect is refused by the prober", target: l.target(l.B.Addr, echoPort, echo.UDP), connect: true, want: []probe.ErrClass{probe.Other}},
		{name: "invalid target", target: probe.Destination{Protocol: echo.TCP}, want: []probe.ErrClass{probe.Other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			var res probe.Result
			if tt.connect {
				res = l.p.Connect(context.Background(), tt.target, probe.Options{Timeout: timeout})
			} else {
				res = l.p.Request(context.Background(), tt.target, probe.Options{Timeout: timeout})
			}
			elapsed := time.Since(start)
			assert.Contains(t, tt.want, res.Class, "err: %v", res.Err)
			assert.Less(t, elapsed, timeout+time.Second, "the probe is bounded by its timeout")
			if res.Class != probe.OK {
				require.Error(t, res.Err)
				assert.Zero(t, res.Answer)
				return
			}
			require.NoError(t, res.Err)
			assert.Equal(t, l.A.Addr, res.Local.Addr())
			assert.Positive(t, res.Total)
			switch {
			case tt.connect:
				assert.Positive(t, res.Connect)
				assert.Equal(t, res.Connect, res.Total)
				assert.Zero(t, res.Answer, "connect-only probes read no answer")
			case tt.target.Protocol == echo.TCP:
				assert.Positive(t, res.Connect)
				assert.GreaterOrEqual(t, res.Total, res.Connect)
			default:
				assert.Zero(t, res.Connect)
			}
			if !tt.connect {
				assert.Equal(t, "web-1", res.Answer.Pod)
				assert.Equal(t, res.Local, res.Answer.Client)
				assert.Equal(t, tt.target.Protocol, res.Answer.Protocol)
			}
		})
	}
}

func TestRefusedIsImmediate(t *testing.T) {
	l := newLab(t)
	// A RST comes back at once: the probe must not wait for its (long) timeout.
	res := l.p.Request(context.Background(), l.target(l.B.Addr, closedPort, echo.TCP), probe.Options{Timeout: 30 * time.Second})
	assert.Equal(t, probe.Refused, res.Class, "err: %v", res.Err)
	assert.Less(t, res.Connect, time.Second)
}

func TestDialKeepsTheConnection(t *testing.T) {
	l := newLab(t)
	for _, proto := range []echo.Protocol{echo.TCP, echo.UDP} {
		t.Run(string(proto), func(t *testing.T) {
			c, err := l.p.Dial(context.Background(), l.target(l.B.Addr, echoPort, proto), probe.Options{Timeout: time.Second})
			require.NoError(t, err)
			defer c.Close()
			if proto == echo.TCP {
				assert.Positive(t, c.Connect())
			}
			for i := range 3 {
				res := c.Request(context.Background())
				require.NoError(t, res.Err, "request %d", i)
				assert.Equal(t, c.Local(), res.Answer.Client, "same connection, same client address")
				assert.Zero(t, res.Connect)
				assert.Positive(t, res.Total)
			}
		})
	}
	t.Run("dial refused", func(t *testing.T) {
		c, err := l.p.Dial(context.Background(), l.target(l.B.Addr, closedPort, echo.TCP), probe.Options{})
		assert.Nil(t, c)
		assert.Equal(t, probe.Refused, probe.Classify(err), "err: %v", err)
	})
}

func TestFixedSourcePort(t *testing.T) {
	l := newLab(t)
	tests := []struct {
		proto echo.Protocol
		port  uint16
	}{
		{echo.UDP, 40001},
		{echo.TCP, 40002},
	}
	for _, tt := range tests {
		t.Run(string(tt.proto), func(t *testing.T) {
			// Twice in a row: the second probe must be able to reuse the port.
			for i := range 2 {
				res := l.p.Request(context.Background(), l.target(l.B.Addr, echoPort, tt.proto), probe.Options{SourcePort: tt.port})
				require.NoError(t, res.Err, "probe %d", i)
				assert.Equal(t, netip.AddrPortFrom(l.A.Addr, tt.port), res.Answer.Client)
			}
		})
	}
}

func TestConcurrentProbes(t *testing.T) {
	l := newLab(t, probe.WithWorkers(4))
	// A second prober in the same namespace, with one worker, used at the same time.
	p2, err := probe.New(l.A.Path, probe.WithWorkers(1))
	require.NoError(t, err)
	defer p2.Close()
	probers := []*probe.Prober{l.p, p2}
	const goroutines, each = 16, 25
	var wg sync.WaitGroup
	results := make(chan probe.Result, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proto := []echo.Protocol{echo.TCP, echo.UDP}[g%2]
			p := probers[g/2%2]
			for range each {
				results <- p.Request(context.Background(), l.target(l.B.Addr, echoPort, proto), probe.Options{Timeout: 5 * time.Second})
			}
		}()
	}
	wg.Wait()
	close(results)
	clients := map[netip.AddrPort]bool{}
	for res := range results {
		require.NoError(t, res.Err)
		clients[res.Answer.Client] = true
	}
	assert.Greater(t, len(clients), 1, "ephemeral source ports")
}

func TestClosedProber(t *testing.T) {
	l := newLab(t)
	require.NoError(t, l.p.Close())
	require.NoError(t, l.p.Close(), "Close is idempotent")
	res := l.p.Request(context.Background(), l.target(l.B.Addr, echoPort, echo.TCP), probe.Options{})
	assert.ErrorIs(t, res.Err, probe.ErrClosed)
	assert.Equal(t, probe.Other, res.Class)
	_, err := l.p.Dial(context.Background(), l.target(l.B.Addr, echoPort, echo.TCP), probe.Options{})
	assert.ErrorIs(t, err, probe.ErrClosed)
}

func TestCancelledContext(t *testing.T) {
	l := newLab(t, probe.WithWorkers(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := l.p.Request(ctx, l.target(l.Silent, echoPort, echo.TCP), probe.Options{Timeout: 30 * time.Second})
	assert.ErrorIs(t, res.Err, context.Canceled)
}
