//go:build linux

package probe_test

import (
	"context"
	"sync/atomic"
	"testing"

	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// reportRate adds the probes/s metric.
func reportRate(b *testing.B, n int64) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "probes/s")
}

// BenchmarkProbe measures probes per second against one echo server across a veth pair,
// one probe at a time: the cost of the probe machinery itself (worker hand-off, socket,
// handshake, request, RST) that every measured latency includes.
func BenchmarkProbe(b *testing.B) {
	l := newLab(b, probe.WithWorkers(1))
	ctx := context.Background()
	tcp := l.target(l.B.Addr, echoPort, echo.TCP)
	udp := l.target(l.B.Addr, echoPort, echo.UDP)
	run := func(b *testing.B, fn func() probe.Result) {
		var n int64
		for b.Loop() {
			if res := fn(); res.Err != nil {
				b.Fatal(res.Err)
			}
			n++
		}
		reportRate(b, n)
	}
	b.Run("tcp-request", func(b *testing.B) {
		run(b, func() probe.Result { return l.p.Request(ctx, tcp, probe.Options{}) })
	})
	b.Run("tcp-connect", func(b *testing.B) {
		run(b, func() probe.Result { return l.p.Connect(ctx, tcp, probe.Options{}) })
	})
	b.Run("udp-request", func(b *testing.B) {
		run(b, func() probe.Result { return l.p.Request(ctx, udp, probe.Options{}) })
	})
	b.Run("tcp-established", func(b *testing.B) {
		c, err := l.p.Dial(ctx, tcp, probe.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, func() probe.Result { return c.Request(ctx) })
	})
}

// BenchmarkProbeParallel measures connect+request probes per second with 4 workers and
// parallel callers.
func BenchmarkProbeParallel(b *testing.B) {
	l := newLab(b, probe.WithWorkers(4))
	ctx := context.Background()
	tcp := l.target(l.B.Addr, echoPort, echo.TCP)
	var n atomic.Int64
	b.SetParallelism(2) // 2 × GOMAXPROCS callers for 4 workers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := l.p.Request(ctx, tcp, probe.Options{}); res.Err != nil {
				b.Error(res.Err)
				return
			}
			n.Add(1)
		}
	})
	reportRate(b, n.Load())
}
