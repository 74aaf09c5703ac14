package microvm

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Markers init.sh writes into the guest's kernel log (/dev/kmsg) around the command, so that
// the events of the command can be told from those of the boot.
const (
	markerStart = "kpbench-vm: command start"
	markerEnd   = "kpbench-vm: command end"
)

// Kinds of KernelEvent.
const (
	// EventWarning is a WARN() splat: "WARNING: CPU: 0 PID: 12 at net/netfilter/...".
	EventWarning = "warning"
	// EventSoftLockup is the watchdog's "BUG: soft lockup - CPU#0 stuck for 23s!": a CPU ran
	// kernel code that long without scheduling.
	EventSoftLockup = "soft-lockup"
	// EventRCUStall is an RCU CPU stall ("rcu: INFO: rcu_preempt detected stalls").
	EventRCUStall = "rcu-stall"
	// EventHungTask is "INFO: task nft:123 blocked for more than 120 seconds.".
	EventHungTask = "hung-task"
	// EventOOM is the OOM killer ("Out of memory: Killed process ...").
	EventOOM = "oom"
	// EventOops is any other "BUG:", "Oops:" or general protection fault.
	EventOops = "oops"
	// EventPanic is "Kernel panic - not syncing".
	EventPanic = "panic"
)

// KernelEvent is one notable line of a guest kernel log.
type KernelEvent struct {
	// Kind is one of the Event* constants.
	Kind string
	// Uptime is the kernel's timestamp of the line (time since boot), zero when the line had
	// none.
	Uptime time.Duration
	// Stuck is how long the CPU was stuck, for soft lockups.
	Stuck time.Duration
	// Line is the log line, timestamp included.
	Line string
}

// KernelLog sums up the notable events of a guest kernel log while the command ran.
type KernelLog struct {
	// Events lists the notable lines in log order.
	Events []KernelEvent
	// Marked is true when the log held the command's start marker, so that Events are those
	// of the command only; false means the whole log was scanned (the boot included), e.g.
	// because the ring buffer overflowed or the guest died before the command started.
	Marked bool
	// Lines is the number of log lines scanned.
	Lines int
}

// Count returns how many events of kind the log holds.
func (k KernelLog) Count(kind string) int {
	n := 0
	for _, e := range k.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// MaxStuck is the longest soft lockup, zero without one.
func (k KernelLog) MaxStuck() time.Duration {
	var m time.Duration
	for _, e := range k.Events {
		if e.Kind == EventSoftLockup && e.Stuck > m {
			m = e.Stuck
		}
	}
	return m
}

// Summary is a one-line account: "2 warnings, 1 soft lockup (max 23s)", or "clean".
func (k KernelLog) Summary() string {
	var parts []string
	for _, kind := range []string{EventPanic, EventOops, EventWarning, EventSoftLockup, EventRCUStall, EventHungTask, EventOOM} {
		n := k.Count(kind)
		if n == 0 {
			continue
		}
		s := fmt.Sprintf("%d %s", n, strings.ReplaceAll(kind, "-", " "))
		if n > 1 {
			s += "s"
		}
		if kind == EventSoftLockup {
			s += fmt.Sprintf(" (max %s)", k.MaxStuck())
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "clean"
	}
	return strings.Join(parts, ", ")
}

var (
	// kmsgTimeRE is the timestamp dmesg prints: "[   12.345678] ".
	kmsgTimeRE = regexp.MustCompile(`^\s*(?:<\d+>)?\[\s*(\d+)\.(\d{1,9})\]\s?`)
	// softLockupRE is the watchdog's report; the duration is in seconds.
	softLockupRE = regexp.MustCompile(`BUG: soft lockup - CPU#\d+ stuck for (\d+)s!`)
	// eventREs classify the other lines, first match wins.
	eventREs = []struct {
		kind string
		re   *regexp.Regexp
	}{
		{EventPanic, regexp.MustCompile(`Kernel panic - not syncing`)},
		{EventWarning, regexp.MustCompile(`^WARNING: CPU: \d+ PID: \d+ at `)},
		{EventRCUStall, regexp.MustCompile(`rcu: INFO: \S+ (self-)?detected stalls?`)},
		{EventHungTask, regexp.MustCompile(`^INFO: task \S+ blocked for more than \d+ seconds`)},
		{EventOOM, regexp.MustCompile(`^Out of memory: Killed process`)},
		{EventOops, regexp.MustCompile(`^(BUG: |Oops: |general protection fault)`)},
	}
)

// ScanKernelLog reads a guest kernel log (the output of dmesg, or the serial console) and
// returns its notable events. When the log holds init's start marker, only what follows
// it (up to the end marker) counts.
func ScanKernelLog(r io.Reader) (KernelLog, error) {
	var all, marked []KernelEvent
	var k KernelLog
	inCommand, ended := false, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		k.Lines++
		body := line
		var up time.Duration
		if m := kmsgTimeRE.FindStringSubmatch(line); m != nil {
			body = line[len(m[0]):]
			up = parseUptime(m[1], m[2])
		}
		switch {
		case strings.Contains(body, markerStart):
			k.Marked, inCommand, ended, marked = true, true, false, nil
			continue
		case strings.Contains(body, markerEnd):
			inCommand, ended = false, true
			continue
		}
		ev, ok := classify(body)
		if !ok {
			continue
		}
		ev.Uptime, ev.Line = up, line
		all = append(all, ev)
		if inCommand && !ended {
			marked = append(marked, ev)
		}
	}
	if err := sc.Err(); err != nil {
		return KernelLog{}, fmt.Errorf("read kernel log: %w", err)
	}
	k.Events = all
	if k.Marked {
		k.Events = marked
	}
	return k, nil
}

// classify returns the event a log line (without its timestamp) reports.
func classify(body string) (KernelEvent, bool) {
	if m := softLockupRE.FindStringSubmatch(body); m != nil {
		s, _ := strconv.Atoi(m[1])
		return KernelEvent{Kind: EventSoftLockup, Stuck: time.Duration(s) * time.Second}, true
	}
	for _, e := range eventREs {
		if e.re.MatchString(body) {
			return KernelEvent{Kind: e.kind}, true
		}
	}
	return KernelEvent{}, false
}

// parseUptime turns the seconds and fraction of a dmesg timestamp into a duration.
func parseUptime(sec, frac string) time.Duration {
	s, _ := strconv.ParseInt(sec, 10, 64)
	for len(frac) < 9 {
		frac += "0"
	}
	ns, _ := strconv.ParseInt(frac, 10, 64)
	return time.Duration(s)*time.Second + time.Duration(ns)
}
