package scenarios

import (
	"context"
	"sync/atomic"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab/probe"
)

// countingProber passes every probe to its Prober and reports the probes sent to the
// session's progress, at most about a hundred times per measurement (a progress update
// is terminal output between two timed probes: kept rare).
type countingProber struct {
	cluster.Prober
	advance func(done, total int)
	total   int
	every   int64
	sent    atomic.Int64
}

// probeProgress wraps pr so that the running step shows probes sent of total.
func probeProgress(s *Session, pr cluster.Prober, total int) *countingProber {
	return &countingProber{Prober: pr, advance: s.Advance, total: total, every: int64(max(1, total/100))}
}

func (c *countingProber) sentOne() {
	n := c.sent.Add(1)
	if n%c.every == 0 || n == int64(c.total) {
		c.advance(min(int(n), c.total), c.total)
	}
}

// Request sends one request and counts it.
func (c *countingProber) Request(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result {
	defer c.sentOne()
	return c.Prober.Request(ctx, target, opts)
}

// Connect opens one connection and counts it.
func (c *countingProber) Connect(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result {
	defer c.sentOne()
	return c.Prober.Connect(ctx, target, opts)
}

// Dial opens a kept connection whose requests are counted.
func (c *countingProber) Dial(ctx context.Context, target probe.Destination, opts probe.Options) (cluster.Conn, error) {
	conn, err := c.Prober.Dial(ctx, target, opts)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: conn, sent: c.sentOne}, nil
}

// countingConn counts the requests of a kept connection.
type countingConn struct {
	cluster.Conn
	sent func()
}

// Request sends one request over the connection and counts it.
func (c countingConn) Request(ctx context.Context) probe.Result {
	defer c.sent()
	return c.Conn.Request(ctx)
}
