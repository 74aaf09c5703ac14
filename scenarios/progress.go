package scenarios

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// TickInterval is how often TickerProgress writes a line during a long step.
const TickInterval = 10 * time.Second

// NewProgress returns the Progress a run writes to w: a TermProgress (a live bar per
// step) when w is a terminal, else a TickerProgress (a line per finished step, and one at
// least every TickInterval while a step runs).
func NewProgress(w io.Writer) Progress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return NewTermProgress(w)
	}
	return NewTickerProgress(w, TickInterval)
}

// ticker is a source of ticks and the function that stops it (time.NewTicker's, or a
// test's channel).
type ticker func(d time.Duration) (<-chan time.Time, func())

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// stepClock is what both progress writers know of the running step, guarded by mu.
type stepClock struct {
	mu          sync.Mutex
	ev          StepEvent
	started     time.Time
	done, total int
	stop        chan struct{} // closed by StepFinished
	exited      chan struct{} // closed by the step's goroutine when it returns
}

// begin records a new step and starts fn in a goroutine that runs until end.
func (c *stepClock) begin(ev StepEvent, now time.Time, fn func(stop <-chan struct{})) {
	c.end()
	c.mu.Lock()
	c.ev, c.started, c.done, c.total = ev, now, 0, 0
	stop, exited := make(chan struct{}), make(chan struct{})
	c.stop, c.exited = stop, exited
	c.mu.Unlock()
	go func() {
		defer close(exited)
		fn(stop)
	}()
}

// end stops the running step's goroutine and waits for it.
func (c *stepClock) end() {
	c.mu.Lock()
	stop, exited := c.stop, c.exited
	c.stop, c.exited = nil, nil
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-exited
	}
}

// advance records done units of total.
func (c *stepClock) advance(done, total int) {
	c.mu.Lock()
	c.done, c.total = done, total
	c.mu.Unlock()
}

// status describes the running step at now: "running 42s, 3/10 (about 1m38s left)".
func (c *stepClock) status(now time.Time) (StepEvent, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := now.Sub(c.started).Truncate(time.Second)
	msg := "running " + el.String()
	switch {
	case c.total > 0 && c.done > 0:
		left := time.Duration(float64(now.Sub(c.started)) * float64(c.total-c.done) / float64(c.done)).Truncate(time.Second)
		msg += fmt.Sprintf(", %d/%d (about %s left)", c.done, c.total, left)
	case c.total > 0:
		msg += fmt.Sprintf(", 0/%d", c.total)
	case c.done > 0:
		msg += fmt.Sprintf(", %d done", c.done)
	}
	return c.ev, msg
}

// TickerProgress is LineProgress for output that is not a terminal (a pipe, a CI log):
// a line per finished step and per note, and while a step runs a line every interval
// with its elapsed time, units done and an estimate of the time left.
type TickerProgress struct {
	line      LineProgress
	interval  time.Duration
	newTicker ticker
	now       func() time.Time
	clock     stepClock
}

// NewTickerProgress writes to w, a status line every interval during a step.
func NewTickerProgress(w io.Writer, interval time.Duration) *TickerProgress {
	return &TickerProgress{line: LineProgress{W: w}, interval: interval, newTicker: realTicker, now: time.Now}
}

// StepStarted starts the step's ticker.
func (p *TickerProgress) StepStarted(ev StepEvent) {
	p.clock.begin(ev, p.now(), func(stop <-chan struct{}) {
		ticks, stopTicker := p.newTicker(p.interval)
		defer stopTicker()
		for {
			select {
			case <-stop:
				return
			case <-ticks:
				ev, msg := p.clock.status(p.now())
				p.line.Note(ev.Backend, fmt.Sprintf("%d/%d %s: %s", ev.Index, ev.Total, ev.Label, msg))
			}
		}
	})
}

// StepAdvanced records the units done (shown by the next tick).
func (p *TickerProgress) StepAdvanced(_ StepEvent, done, total int) { p.clock.advance(done, total) }

// StepFinished stops the ticker and writes the step's line.
func (p *TickerProgress) StepFinished(ev StepEvent, d time.Duration, err error) {
	p.clock.end()
	p.line.StepFinished(ev, d, err)
}

// Note writes the note's line.
func (p *TickerProgress) Note(backend, msg string) { p.line.Note(backend, msg) }

// TermProgress draws a live bar for the running step on a terminal (schollz/progressbar):
// the step, units done of total (a spinner when the total is not known), the elapsed
// time and an estimate of what is left, redrawn every second; then the step's line as
// LineProgress writes it.
type TermProgress struct {
	w     io.Writer
	line  LineProgress
	mu    sync.Mutex // guards bar
	bar   *progressbar.ProgressBar
	clock stepClock
	// throttle is the shortest time between two redraws.
	throttle time.Duration
}

// NewTermProgress draws on w.
func NewTermProgress(w io.Writer) *TermProgress {
	return &TermProgress{w: w, line: LineProgress{W: w}, throttle: 200 * time.Millisecond}
}

func (p *TermProgress) newBar(ev StepEvent, total int) *progressbar.ProgressBar {
	if total <= 0 {
		total = -1
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(fmt.Sprintf("[%s] %d/%d %s", ev.Backend, ev.Index, ev.Total, ev.Label)),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSpinnerType(14),
		// No spinner goroutine of the library's own: it renders until the bar is
		// finished, and a cleared bar is not; StepStarted's ticker redraws instead.
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionThrottle(p.throttle),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
	)
}

// StepStarted draws the step's bar and redraws it every second (elapsed time, spinner).
func (p *TermProgress) StepStarted(ev StepEvent) {
	p.mu.Lock()
	p.bar = p.newBar(ev, 0)
	p.mu.Unlock()
	p.clock.begin(ev, time.Now(), func(stop <-chan struct{}) {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.mu.Lock()
				if p.bar != nil {
					_ = p.bar.Add(0)
				}
				p.mu.Unlock()
			}
		}
	})
}

// StepAdvanced moves the bar to done of total.
func (p *TermProgress) StepAdvanced(ev StepEvent, done, total int) {
	p.clock.advance(done, total)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	if total > 0 && p.bar.GetMax() != total {
		_ = p.bar.Clear()
		p.bar = p.newBar(ev, total) // known from now on: a bar, not a spinner
	}
	_ = p.bar.Set(done)
}

// StepFinished clears the bar and writes the step's line.
func (p *TermProgress) StepFinished(ev StepEvent, d time.Duration, err error) {
	p.clock.end()
	p.mu.Lock()
	if p.bar != nil {
		_ = p.bar.Clear()
		p.bar = nil
	}
	p.mu.Unlock()
	p.line.StepFinished(ev, d, err)
}

// Note writes the note's line above the bar.
func (p *TermProgress) Note(backend, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	p.line.Note(backend, msg)
	if p.bar != nil {
		_ = p.bar.RenderBlank()
	}
}
