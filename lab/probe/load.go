//go:build linux

package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/lab/echo"
)

// LoadMode is what each operation of a load is.
type LoadMode string

// The load modes.
const (
	// LoadConnections: every operation is a new TCP connection (connect, one request,
	// read the answer, close with a RST), the "new connections per second" load that
	// exercises the proxy's lookup and NAT setup for every connection.
	LoadConnections LoadMode = "connections"
	// LoadRequests: every worker keeps one TCP connection and sends request after request
	// over it (keep-alive); the connect is not counted. This is the established-flow
	// path: conntrack hits in the kernel modes, two socket copies in the userspace proxy.
	LoadRequests LoadMode = "requests"
)

// Defaults and bounds of LoadSpec.
const (
	// DefaultLoadWorkers is the number of concurrent workers of a load.
	DefaultLoadWorkers = 8
	// MaxLoadWorkers bounds LoadSpec.Workers: each worker is an OS thread.
	MaxLoadWorkers = 256
	// DefaultLoadDuration is how long a load runs.
	DefaultLoadDuration = 3 * time.Second
	// MaxLoadDuration bounds LoadSpec.Duration.
	MaxLoadDuration = 5 * time.Minute
	// DefaultLoadMaxOps bounds the operations (successful or not) of one load.
	DefaultLoadMaxOps = 1_000_000
	// DefaultLoadSlice is the width of the time slices operations are counted in.
	DefaultLoadSlice = 100 * time.Millisecond
	// DefaultLoadOpTimeout bounds one operation (connect, request and answer).
	DefaultLoadOpTimeout = time.Second
	// maxLoadLatencies bounds the latencies a load keeps (the first ones of each worker).
	maxLoadLatencies = 200_000
)

// LoadSpec describes one load from one lab host. The zero value of each field takes its
// default.
type LoadSpec struct {
	// Target is the destination (TCP only): a Service VIP or node port, or a pod.
	Destination Destination
	// Mode is LoadConnections or LoadRequests.
	Mode LoadMode
	// Workers is the number of concurrent workers (default DefaultLoadWorkers, at most
	// MaxLoadWorkers), each on its own locked thread in the host's namespace.
	Workers int
	// Duration is how long the load runs (default DefaultLoadDuration, at most
	// MaxLoadDuration).
	Duration time.Duration
	// MaxOps ends the load early once this many operations (successful or failed) were
	// made (default DefaultLoadMaxOps).
	MaxOps int
	// Slice is the width of the time slices in LoadResult.Slices (default
	// DefaultLoadSlice).
	Slice time.Duration
	// OpTimeout bounds each operation (default DefaultLoadOpTimeout).
	OpTimeout time.Duration
	// Payload is the request line (default DefaultPayload).
	Payload []byte
}

// withDefaults returns the spec with defaults filled in, or an error for a spec that
// cannot run.
func (s LoadSpec) withDefaults() (LoadSpec, error) {
	if s.Destination.Protocol != echo.TCP {
		return s, fmt.Errorf("load %s: only TCP", s.Destination)
	}
	if !s.Destination.Addr.IsValid() || s.Destination.Addr.Port() == 0 {
		return s, fmt.Errorf("load: invalid target address %q", s.Destination.Addr)
	}
	switch s.Mode {
	case LoadConnections, LoadRequests:
	default:
		return s, fmt.Errorf("load %s: mode %q: want %q or %q", s.Destination, s.Mode, LoadConnections, LoadRequests)
	}
	if s.Workers <= 0 {
		s.Workers = DefaultLoadWorkers
	}
	if s.Workers > MaxLoadWorkers {
		return s, fmt.Errorf("load %s: %d workers, at most %d", s.Destination, s.Workers, MaxLoadWorkers)
	}
	if s.Duration <= 0 {
		s.Duration = DefaultLoadDuration
	}
	if s.Duration > MaxLoadDuration {
		return s, fmt.Errorf("load %s: duration %s, at most %s", s.Destination, s.Duration, MaxLoadDuration)
	}
	if s.MaxOps <= 0 {
		s.MaxOps = DefaultLoadMaxOps
	}
	if s.Slice <= 0 {
		s.Slice = DefaultLoadSlice
	}
	if s.OpTimeout <= 0 {
		s.OpTimeout = DefaultLoadOpTimeout
	}
	s.Payload = Options{Payload: s.Payload}.payload(echo.TCP)
	return s, nil
}

// LoadResult is what one load did.
type LoadResult struct {
	// Mode is the load's mode; Workers the workers that ran.
	Mode    LoadMode
	Workers int
	// Elapsed is the measured window: from the start signal to the last worker's end.
	Elapsed time.Duration
	// Ops is the number of successful operations (answer read); Errors the failed ones.
	Ops, Errors int
	// Classes counts failed operations by class.
	Classes map[ErrClass]int
	// FirstErr is the first failure, nil when none.
	FirstErr error
	// Slices[i] is the number of operations that completed successfully in the i-th
	// Slice-wide window after the start (the last one may be partial: see Slice and
	// Elapsed).
	Slices []int
	// Slice is the width of each entry of Slices.
	Slice time.Duration
	// PerWorker[i] is the number of successful operations of worker i.
	PerWorker []int
	// Latencies are the durations of successful operations (connect to answer for
	// LoadConnections, request to answer for LoadRequests), at most maxLoadLatencies in
	// all, the earliest of each worker first.
	Latencies []time.Duration
	// Pods counts the answers by answering pod (the "pod=" field of the echo answer).
	Pods map[string]int
}

// Rate returns successful operations per second over the whole window.
func (r LoadResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// SliceRates returns the rate of each full slice (operations per second); the last
// slice is left out when it is shorter than half a slice, so that a stub does not read as
// a dip.
func (r LoadResult) SliceRates() []float64 {
	n := len(r.Slices)
	if n == 0 || r.Slice <= 0 {
		return nil
	}
	if tail := r.Elapsed - time.Duration(n-1)*r.Slice; n > 1 && tail < r.Slice/2 {
		n--
	}
	out := make([]float64, n)
	for i := range n {
		out[i] = float64(r.Slices[i]) / r.Slice.Seconds()
	}
	return out
}

// loadWorker is what one worker counted; only its own goroutine writes it until the load
// ends.
type loadWorker struct {
	slices    []int
	ops, errs int
	classes   map[ErrClass]int
	firstErr  error
	lat       []time.Duration
	pods      map[string]int
	br        *bufio.Reader
	conn      net.Conn // LoadRequests: the kept-alive connection
	startErr  error
	netDialer net.Dialer
	w         *netns.Worker // the worker's thread in the namespace, for every new socket
}

// Load runs a load from the lab host whose namespace is at nsPath: spec.Workers workers,
// each a netns.Worker (a locked OS thread inside the namespace that checks netns.Guard
// before creating any socket, and refuses in the host's root namespace), start together
// and run until spec.Duration has passed, spec.MaxOps operations were made, or ctx ends.
// Every socket is created on a worker's thread, so the load never leaves the lab's
// namespaces. Short connections end with a RST (see the package documentation), so
// thousands of them from one address exhaust neither ephemeral ports nor TIME_WAIT slots.
//
// Load fails (without a result) only when it cannot start: bad spec, namespace
// unreachable, root namespace, or in LoadRequests mode when no worker could connect.
// Failures of single operations are counted in the result.
func Load(ctx context.Context, nsPath string, spec LoadSpec) (LoadResult, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return LoadResult{}, err
	}
	workers := make([]*netns.Worker, 0, spec.Workers)
	defer func() {
		for _, w := range workers {
			w.Stop()
		}
	}()
	state := make([]*loadWorker, spec.Workers)
	for i := range spec.Workers {
		w, err := netns.StartWorker(nsPath)
		if err != nil {
			return LoadResult{}, fmt.Errorf("load from %s: %w", nsPath, err)
		}
		workers = append(workers, w)
		lw := &loadWorker{w: w, classes: map[ErrClass]int{}, pods: map[string]int{}}
		lw.netDialer.Timeout = spec.OpTimeout
		state[i] = lw
		if err := w.Run(ctx, netns.Guard); err != nil {
			return LoadResult{}, fmt.Errorf("load from %s: %w", nsPath, err)
		}
	}
	// Keep-alive: every worker connects before the window opens.
	if spec.Mode == LoadRequests {
		var wg sync.WaitGroup
		for i, w := range workers {
			lw := state[i]
			wg.Go(func() {
				// Background: the dial is bounded by OpTimeout and ctx itself, and Run
				// must not return before the job has finished with lw.
				err := w.Run(context.Background(), func() error {
					c, err := lw.dial(ctx, spec)
					lw.conn = c
					return err
				})
				if err != nil {
					lw.startErr = err
				}
			})
		}
		wg.Wait()
		connected := 0
		for _, lw := range state {
			if lw.startErr == nil {
				connected++
			}
		}
		if connected == 0 {
			return LoadResult{}, fmt.Errorf("load %s from %s: no worker could connect: %w", spec.Destination, nsPath, state[0].startErr)
		}
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, spec.Duration+2*spec.OpTimeout+time.Second)
	defer cancel()
	var (
		budget atomic.Int64 // operations left
		start  = make(chan struct{})
		t0     time.Time
		ends   = make([]time.Time, spec.Workers)
		wg     sync.WaitGroup
	)
	budget.Store(int64(spec.MaxOps))
	nSlices := int((spec.Duration+spec.Slice-1)/spec.Slice) + 1
	latCap := maxLoadLatencies / spec.Workers
	for i, w := range workers {
		lw := state[i]
		lw.slices = make([]int, nSlices)
		lw.lat = make([]time.Duration, 0, min(latCap, 4096))
		loop := func() {
			<-start
			if lw.startErr != nil {
				return // this worker could not connect: it sits the load out
			}
			deadline := t0.Add(spec.Duration)
			for ctx.Err() == nil && time.Now().Before(deadline) && budget.Add(-1) >= 0 {
				opStart := time.Now()
				err := lw.op(ctx, spec)
				now := time.Now()
				if err != nil {
					lw.fail(err)
					continue
				}
				lw.ops++
				k := int(now.Sub(t0) / spec.Slice)
				for k >= len(lw.slices) { // an operation that ended after the window
					lw.slices = append(lw.slices, 0)
				}
				lw.slices[k]++
				if len(lw.lat) < latCap {
					lw.lat = append(lw.lat, now.Sub(opStart))
				}
			}
			ends[i] = time.Now()
			if lw.conn != nil {
				closeRST(lw.conn)
				lw.conn = nil
			}
		}
		if spec.Mode == LoadRequests {
			// The connection exists: its socket keeps its namespace, so requests and
			// answers run on an ordinary goroutine (cheaper than waking a locked thread
			// for every answer). Only a reconnect goes back to the worker's thread.
			wg.Go(loop)
			continue
		}
		wg.Go(func() {
			// Every operation creates a socket: the loop runs on the worker's locked
			// thread, inside the namespace. Run waits for the loop (Background), which
			// ctx, the deadline and the operation timeouts bound, so no worker touches lw
			// after wg.Wait.
			if err := w.Run(context.Background(), func() error { loop(); return nil }); err != nil {
				lw.startErr = err
			}
		})
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	if err := parent.Err(); err != nil {
		return LoadResult{}, fmt.Errorf("load %s from %s: %w", spec.Destination, nsPath, err)
	}
	res := LoadResult{Mode: spec.Mode, Workers: spec.Workers, Classes: map[ErrClass]int{}, Slices: make([]int, 1),
		Slice: spec.Slice, PerWorker: make([]int, spec.Workers), Pods: map[string]int{}}
	var last time.Time
	for i, lw := range state {
		if ends[i].After(last) {
			last = ends[i]
		}
		res.Ops += lw.ops
		res.Errors += lw.errs
		res.PerWorker[i] = lw.ops
		for c, n := range lw.classes {
			res.Classes[c] += n
		}
		if res.FirstErr == nil {
			res.FirstErr = lw.firstErr
		}
		for k, n := range lw.slices {
			if k >= len(res.Slices) {
				res.Slices = append(res.Slices, make([]int, k+1-len(res.Slices))...)
			}
			res.Slices[k] += n
		}
		for p, n := range lw.pods {
			res.Pods[p] += n
		}
		res.Latencies = append(res.Latencies, lw.lat...)
		if lw.startErr != nil {
			res.Errors++
			res.Classes[Classify(lw.startErr)]++
			if res.FirstErr == nil {
				res.FirstErr = lw.startErr
			}
		}
	}
	if last.IsZero() {
		last = time.Now()
	}
	res.Elapsed = last.Sub(t0)
	// Trailing empty slices (the window ended before them) are no data.
	for len(res.Slices) > 1 && res.Slices[len(res.Slices)-1] == 0 && time.Duration(len(res.Slices)-1)*spec.Slice >= res.Elapsed {
		res.Slices = res.Slices[:len(res.Slices)-1]
	}
	return res, nil
}

// fail counts a failed operation.
func (lw *loadWorker) fail(err error) {
	lw.errs++
	lw.classes[Classify(err)]++
	if lw.firstErr == nil {
		lw.firstErr = err
	}
}

// dial connects to the target on the calling thread (a worker's, in the namespace).
func (lw *loadWorker) dial(ctx context.Context, spec LoadSpec) (net.Conn, error) {
	if err := netns.Guard(); err != nil {
		return nil, err
	}
	c, err := lw.netDialer.DialContext(ctx, "tcp", spec.Destination.Addr.String())
	if err != nil {
		return nil, fmt.Errorf("load %s: connect: %w", spec.Destination, err)
	}
	lw.br = bufio.NewReaderSize(c, echo.MaxLineLength)
	return c, nil
}

// op runs one operation on the calling thread.
func (lw *loadWorker) op(ctx context.Context, spec LoadSpec) error {
	if spec.Mode == LoadConnections {
		c, err := lw.dial(ctx, spec)
		if err != nil {
			return err
		}
		defer closeRST(c)
		return lw.exchange(c, spec)
	}
	if lw.conn == nil { // the kept-alive connection broke: connect again, in the namespace
		var c net.Conn
		err := lw.w.Run(context.Background(), func() error {
			var err error
			c, err = lw.dial(ctx, spec)
			return err
		})
		if err != nil {
			return err
		}
		lw.conn = c
	}
	if err := lw.exchange(lw.conn, spec); err != nil {
		closeRST(lw.conn)
		lw.conn = nil
		return err
	}
	return nil
}

// exchange sends the payload over c and reads one answer line, within spec.OpTimeout.
func (lw *loadWorker) exchange(c net.Conn, spec LoadSpec) error {
	if err := c.SetDeadline(time.Now().Add(spec.OpTimeout)); err != nil {
		return fmt.Errorf("load %s: %w", spec.Destination, err)
	}
	if _, err := c.Write(spec.Payload); err != nil {
		return fmt.Errorf("load %s: send: %w", spec.Destination, err)
	}
	line, err := lw.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("load %s: answer longer than %d bytes", spec.Destination, echo.MaxLineLength)
		}
		return fmt.Errorf("load %s: read answer: %w", spec.Destination, err)
	}
	pod, ok := answerPod(line)
	if !ok {
		return fmt.Errorf("load %s: not an echo answer: %q", spec.Destination, bytes.TrimSpace(line))
	}
	lw.pods[string(pod)]++
	return nil
}

// answerPod returns the pod of an echo answer line ("pod=NAME ip=..."), without parsing
// the rest: the load counts answers, the probes check them.
func answerPod(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("pod="))
	if !ok {
		return nil, false
	}
	if i := bytes.IndexByte(rest, ' '); i >= 0 {
		rest = rest[:i]
	}
	return rest, len(rest) > 0
}

// sortedLatencies returns a sorted copy of ds.
func sortedLatencies(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}

// Percentile returns the p-th percentile (0 < p <= 100, nearest rank) of the successful
// operations' latencies, 0 when there are none.
func (r LoadResult) Percentile(p float64) time.Duration {
	s := sortedLatencies(r.Latencies)
	if len(s) == 0 {
		return 0
	}
	k := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(k, 0), len(s)-1)]
}
