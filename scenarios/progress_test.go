package scenarios

import (
	"bytes"
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab/probe"
)

// lineWriter hands every Write to a channel, so that a test waits for a line instead of
// sleeping.
type lineWriter struct{ lines chan string }

func (w lineWriter) Write(b []byte) (int, error) {
	w.lines <- string(b)
	return len(b), nil
}

// fakeTicker is a ticker whose ticks the test sends; it records the interval asked for.
type fakeTicker struct {
	ticks    chan time.Time
	mu       sync.Mutex
	interval time.Duration
	stopped  int
}

func (f *fakeTicker) newTicker(d time.Duration) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.interval = d
	return f.ticks, func() { f.mu.Lock(); f.stopped++; f.mu.Unlock() }
}

func TestTickerProgressWritesWhileAStepRuns(t *testing.T) {
	ev := StepEvent{Backend: "iptables", Index: 3, Total: 9, Label: "full-sync-20k"}
	t0 := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		done, total int
		at          time.Duration
		want        string
	}{
		{"nothing known yet", 0, 0, 10 * time.Second, "3/9 full-sync-20k: running 10s\n"},
		{"units of a known total", 4, 10, 20 * time.Second, "3/9 full-sync-20k: running 20s, 4/10 (about 30s left)\n"},
		{"total not known", 7, 0, 12 * time.Second, "3/9 full-sync-20k: running 12s, 7 done\n"},
		{"none done of a total", 0, 5, 10 * time.Second, "running 10s, 0/5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := lineWriter{lines: make(chan string, 4)}
			ft := &fakeTicker{ticks: make(chan time.Time)}
			now := t0
			p := NewTickerProgress(w, TickInterval)
			p.newTicker = ft.newTicker
			var mu sync.Mutex
			p.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

			p.StepStarted(ev)
			p.StepAdvanced(ev, tt.done, tt.total)
			mu.Lock()
			now = t0.Add(tt.at)
			mu.Unlock()
			ft.ticks <- now // received only by the step's goroutine
			line := <-w.lines
			assert.Contains(t, line, "iptables] ")
			assert.True(t, strings.HasSuffix(line, tt.want), "line %q, want suffix %q", line, tt.want)

			p.StepFinished(ev, tt.at, nil)
			assert.Contains(t, <-w.lines, "3/9 full-sync-20k: ")
			ft.mu.Lock()
			assert.LessOrEqual(t, ft.interval, 10*time.Second, "a line at least every 10 s")
			assert.Equal(t, 1, ft.stopped, "the step's ticker is stopped when it ends")
			ft.mu.Unlock()
			select { // the goroutine has exited: nobody takes a tick any more
			case ft.ticks <- now:
				t.Fatal("a tick was taken after the step finished")
			default:
			}
		})
	}
}

// Without a tick there is no status line: the line comes from the ticker, not from
// StepStarted (the test above would pass for a writer that printed at start).
func TestTickerProgressSilentWithoutTick(t *testing.T) {
	var buf bytes.Buffer
	ft := &fakeTicker{ticks: make(chan time.Time)}
	p := NewTickerProgress(&buf, TickInterval)
	p.newTicker = ft.newTicker
	ev := StepEvent{Backend: "nftables", Index: 1, Total: 2, Label: "grow"}
	p.StepStarted(ev)
	p.StepAdvanced(ev, 1, 2)
	p.StepFinished(ev, time.Second, nil)
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"), buf.String())
	assert.NotContains(t, buf.String(), "running")
}

func TestTermProgressDrawsTheStep(t *testing.T) {
	var buf bytes.Buffer
	p := NewTermProgress(&buf)
	p.throttle = 0 // draw every change
	ev := StepEvent{Backend: "iptables", Index: 2, Total: 5, Label: "grow-to-10k"}
	p.StepStarted(ev)
	p.StepAdvanced(ev, 250, 1000)
	p.StepAdvanced(ev, 1000, 1000)
	p.StepFinished(ev, 3*time.Second, nil)
	out := buf.String()
	assert.Contains(t, out, "[iptables] 2/5 grow-to-10k")
	assert.Contains(t, out, "250/1000")
	require.True(t, strings.HasSuffix(out, "2/5 grow-to-10k: 3.00s\n"), "the step's line comes last: %q", out)
}

// A finished step's bar stops drawing: no goroutine (the library's spinner or ours)
// outlives the step, so an old bar never redraws over the next one.
func TestTermProgressLeavesNoGoroutine(t *testing.T) {
	var buf bytes.Buffer
	p := NewTermProgress(&buf)
	before := runtime.NumGoroutine()
	for i := range 5 {
		ev := StepEvent{Backend: "nftables", Index: i + 1, Total: 5, Label: "wait"}
		p.StepStarted(ev) // total unknown: a spinner
		p.StepFinished(ev, time.Second, nil)
	}
	n := runtime.NumGoroutine()
	for i := 0; i < 10000 && n > before; i++ { // let exiting goroutines finish returning
		runtime.Gosched()
		n = runtime.NumGoroutine()
	}
	assert.LessOrEqual(t, n, before, "goroutines left behind by finished steps")
}

func TestNewProgressOffATerminal(t *testing.T) {
	_, ok := NewProgress(&bytes.Buffer{}).(*TickerProgress)
	assert.True(t, ok, "a writer that is not a terminal gets the line writer")
}

// nopProber answers every probe at once.
type nopProber struct{}

func (nopProber) Request(context.Context, probe.Destination, probe.Options) probe.Result {
	return probe.Result{}
}
func (nopProber) Connect(context.Context, probe.Destination, probe.Options) probe.Result {
	return probe.Result{}
}
func (nopProber) Dial(context.Context, probe.Destination, probe.Options) (cluster.Conn, error) {
	return nopConn{}, nil
}
func (nopProber) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no dial")
}

type nopConn struct{}

func (nopConn) Request(context.Context) probe.Result { return probe.Result{} }
func (nopConn) Close() error                         { return nil }

func TestProbeProgressCountsProbes(t *testing.T) {
	tests := []struct {
		name                  string
		total, connects, kept int
		wantCalls             int
		wantLast              [2]int
	}{
		{"every probe of a small measurement", 3, 2, 1, 3, [2]int{3, 3}},
		{"about a hundred updates of a large one", 1000, 800, 200, 100, [2]int{1000, 1000}},
		{"never beyond the total", 10, 12, 0, 12, [2]int{10, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls [][2]int
			c := &countingProber{Prober: nopProber{}, total: tt.total, every: int64(max(1, tt.total/100)),
				advance: func(done, total int) { calls = append(calls, [2]int{done, total}) }}
			ctx := context.Background()
			for range tt.connects {
				c.Connect(ctx, probe.Destination{}, probe.Options{})
			}
			conn, err := c.Dial(ctx, probe.Destination{}, probe.Options{})
			require.NoError(t, err)
			for range tt.kept {
				conn.Request(ctx)
			}
			assert.Len(t, calls, tt.wantCalls)
			require.NotEmpty(t, calls)
			assert.Equal(t, tt.wantLast, calls[len(calls)-1])
		})
	}
}
