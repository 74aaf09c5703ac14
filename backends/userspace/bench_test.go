//go:build linux

package userspace

import (
	"context"
	"net/netip"
	"testing"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// BenchmarkProxy measures requests per second from the node namespace through the userspace
// proxy, against the same echo server reached directly (the probe's own cost), one request
// at a time: short connections (connect, one line, close) and keep-alive (one connection,
// one line per request), and UDP (new session per probe source port).
func BenchmarkProxy(b *testing.B) {
	l := newTestLab(b)
	l.sync(b, l.service("tcp", backends.TCP, 80, port1), l.service("udp", backends.UDP, 53, port1))
	ctx := context.Background()
	direct := func(proto echo.Protocol) probe.Destination {
		return probe.Destination{Addr: netip.AddrPortFrom(l.B.Addr, port1), Protocol: proto}
	}
	cases := []struct {
		name      string
		tgt       probe.Destination
		keepAlive bool
	}{
		{"tcp-short/direct", direct(echo.TCP), false},
		{"tcp-short/proxy", target(80, backends.TCP), false},
		{"tcp-keepalive/direct", direct(echo.TCP), true},
		{"tcp-keepalive/proxy", target(80, backends.TCP), true},
		{"udp/direct", direct(echo.UDP), false},
		{"udp/proxy", target(53, backends.UDP), false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			req := func() probe.Result { return l.node.Request(ctx, tc.tgt, probe.Options{}) }
			if tc.keepAlive {
				c, err := l.node.Dial(ctx, tc.tgt, probe.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				req = func() probe.Result { return c.Request(ctx) }
			}
			var n int
			for b.Loop() {
				if r := req(); r.Err != nil {
					b.Fatal(r.Err)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
