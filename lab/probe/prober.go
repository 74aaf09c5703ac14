//go:build linux

package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab/echo"
)

// ErrClosed is returned by probes on a closed Prober.
var ErrClosed = errors.New("prober closed")

// DefaultWorkers is the number of connects one Prober runs at the same time by default.
const DefaultWorkers = 4

// Option changes how New builds a Prober.
type Option func(*config)

// config is what Options set.
type config struct {
	workers int
}

// WithWorkers sets how many connects the Prober runs at the same time: the number of
// locked threads it keeps inside its namespace. n must be at least 1.
func WithWorkers(n int) Option {
	return func(c *config) {
		if n >= 1 {
			c.workers = n
		}
	}
}

// Prober sends probes from one lab host's namespace. It is safe for concurrent use: up to
// its number of workers probes connect at the same time, the others wait for a worker.
type Prober struct {
	nsPath  string
	d       dialer
	idle    chan *netns.Worker // workers not running a probe
	n       int
	done    chan struct{}
	closeMu sync.Once
}

// New starts a Prober inside the network namespace at nsPath (a lab host). It refuses
// with netns.ErrRootNamespace when nsPath is the host's root namespace (/proc/1/ns/net, or
// the namespace kpbench started in). Every worker is an OS thread for the Prober's life: a
// lab with thousands of pods should make probers only for the hosts it probes from, with
// WithWorkers(1) where one connect at a time is enough.
func New(nsPath string, opts ...Option) (*Prober, error) {
	cfg := config{workers: DefaultWorkers}
	for _, o := range opts {
		o(&cfg)
	}
	p := &Prober{nsPath: nsPath, idle: make(chan *netns.Worker, cfg.workers), n: cfg.workers, done: make(chan struct{})}
	var started []*netns.Worker
	fail := func(err error) (*Prober, error) {
		for _, w := range started {
			w.Stop()
		}
		return nil, fmt.Errorf("prober in %s: %w", nsPath, err)
	}
	for range cfg.workers {
		w, err := netns.StartWorker(nsPath)
		if err != nil {
			return fail(err)
		}
		started = append(started, w)
		if err := w.Run(context.Background(), netns.Guard); err != nil {
			return fail(err)
		}
	}
	for _, w := range started {
		p.idle <- w
	}
	return p, nil
}

// NSPath returns the path of the namespace the Prober sends from.
func (p *Prober) NSPath() string { return p.nsPath }

// run runs fn on an idle worker. If it returns an error (ctx ended, prober closed), fn may
// still run later and its results must be dropped.
func (p *Prober) run(ctx context.Context, fn func()) error {
	var w *netns.Worker
	select {
	case w = <-p.idle:
	case <-ctx.Done():
		return fmt.Errorf("waiting for a probe worker in %s: %w", p.nsPath, ctx.Err())
	case <-p.done:
		return ErrClosed
	}
	defer func() { p.idle <- w }()
	select {
	case <-p.done:
		return ErrClosed
	default:
	}
	return w.Run(ctx, func() error { fn(); return nil })
}

// Request connects to target (TCP) or sends from a fresh socket (UDP), sends the payload,
// reads the echo answer and closes. Result.Connect is the TCP connect latency, Result.Total
// the latency from connect start to the parsed answer. It returns within Options.Timeout.
func (p *Prober) Request(ctx context.Context, target Destination, opts Options) Result {
	return p.probe(ctx, target, opts, modeRequest)
}

// Connect only connects to target over TCP and closes with a RST (see the package
// documentation): the "first packet" latency through the proxy's lookup, with Total equal to
// Connect. It returns within Options.Timeout.
func (p *Prober) Connect(ctx context.Context, target Destination, opts Options) Result {
	return p.probe(ctx, target, opts, modeConnect)
}

// probe runs one probe. Only the socket and its connect need the namespace: they run on a
// worker, which is free again as soon as the connection is made (or has failed); the
// request and the answer are handled on the caller's goroutine.
func (p *Prober) probe(ctx context.Context, target Destination, opts Options, m mode) Result {
	return probeWith(ctx, p.dial, target, opts, m)
}

// Dial connects to target and keeps the connection open for Conn.Request. Connecting is
// bounded by Options.Timeout; so is each request on the Conn.
func (p *Prober) Dial(ctx context.Context, target Destination, opts Options) (*Conn, error) {
	c, connect, err := p.dial(ctx, target, opts)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	conn := &Conn{c: c, target: target, opts: opts, local: localAddr(c)}
	if target.Protocol == echo.TCP {
		conn.connect = connect
		conn.br = bufio.NewReaderSize(c, echo.MaxLineLength)
	}
	return conn, nil
}

// DialContext dials a TCP connection from the Prober's namespace, for an http.Transport
// (Transport{DialContext: p.DialContext}). address must be a literal IP and port: there is
// no name resolution in the lab. Connecting is bounded by DefaultTimeout. The connection
// closes normally (FIN).
func (p *Prober) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if !strings.HasPrefix(network, "tcp") {
		return nil, fmt.Errorf("dial %s %s: only tcp", network, address)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s %s: literal ip:port needed: %w", network, address, err)
	}
	target := Destination{Addr: ap, Protocol: echo.TCP}
	c, _, err := p.dial(ctx, target, Options{})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	return c, nil
}

// dial connects a socket on a worker, bounded by opts' timeout. A connection that a worker
// makes after the caller gave up waiting is closed, never leaked.
func (p *Prober) dial(ctx context.Context, target Destination, opts Options) (net.Conn, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	var (
		mu        sync.Mutex
		abandoned bool
		c         net.Conn
		connect   time.Duration
		err       error
	)
	rerr := p.run(ctx, func() {
		dc, dt, derr := p.d.dial(ctx, target, opts)
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if dc != nil {
				_ = dc.Close()
			}
			return
		}
		c, connect, err = dc, dt, derr
	})
	mu.Lock()
	defer mu.Unlock()
	if rerr != nil {
		abandoned = true
		if c != nil {
			_ = c.Close()
		}
		return nil, 0, rerr
	}
	return c, connect, err
}

// Close waits for the probes in flight (each bounded by its timeout), then stops the
// workers and their threads. Probes after Close fail with ErrClosed. Close is idempotent.
func (p *Prober) Close() error {
	p.closeMu.Do(func() {
		close(p.done)
		for range p.n {
			(<-p.idle).Stop()
		}
	})
	return nil
}
