// Package probe sends test traffic from lab hosts (external clients, pods, nodes) to Services
// and pods, and measures it: connect latency (the "first packet" cost of the proxy's lookup),
// total request latency, which pod answered and which client address it saw.
//
// Every socket is created on a thread inside a lab namespace, and every send path checks
// with internal/netns.Guard, on the thread that creates the socket, that this thread is not in
// the host's root namespace: a probe sent from there would leave the machine.
//
// A Prober owns a small pool of internal/netns.Workers (locked threads inside one namespace).
// Only what needs the namespace runs on a worker: the guard, the socket and its connect
// (net.Dialer does all three on the calling thread, and waits for the handshake there; the
// goroutine stays locked, so its thread never leaves the namespace). A socket keeps its
// namespace for life, so the request and the answer are then handled on the caller's
// goroutine and the worker is free for the next connect. The pool size is thus the number
// of connects in flight. Measured latencies start after a worker is taken, so queueing is
// not measured, but Options.Timeout bounds the whole call, queueing included. Handing the
// connect to a locked thread costs a few tens of microseconds of thread wake-ups, the same
// for every probe (see BenchmarkProbe).
//
// TCP probes end with SO_LINGER 0: close sends a RST instead of a FIN, so the client keeps no
// TIME_WAIT socket and thousands of probes from one address do not exhaust the ephemeral
// ports (nor fill conntrack with TIME_WAIT entries). The answer has been read by then.
package probe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"kpbench.dev/kpbench/lab/echo"
)

// DefaultTimeout bounds a probe whose Options.Timeout is zero.
const DefaultTimeout = 2 * time.Second

// DefaultPayload is the line a probe sends when Options.Payload is empty.
const DefaultPayload = "kpbench probe\n"

// Target is where a probe goes.
type Destination struct {
	// Addr is the destination: a Service VIP, node IP with node port, or pod IP, with port.
	Addr netip.AddrPort
	// Protocol is TCP or UDP.
	Protocol echo.Protocol
}

// String renders the target as 10.96.0.10:53/UDP.
func (t Destination) String() string { return t.Addr.String() + "/" + string(t.Protocol) }

// Options tune one probe. The zero value is a good default.
type Options struct {
	// Timeout bounds the whole probe (waiting for a worker, connect, request, answer).
	// Zero means DefaultTimeout. A shorter deadline of the context wins.
	Timeout time.Duration
	// SourcePort, when not zero, is the fixed local port to send from (UDP conntrack tests).
	// Zero means an ephemeral port.
	SourcePort uint16
	// Payload is what is sent: one line over TCP (a newline is added when missing) or one
	// datagram over UDP. Empty means DefaultPayload. It must not be an HTTP request line,
	// whose answer is not one line.
	Payload []byte
}

// timeout returns the effective timeout.
func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// payload returns the bytes to send for protocol p.
func (o Options) payload(p echo.Protocol) []byte {
	b := o.Payload
	if len(b) == 0 {
		b = []byte(DefaultPayload)
	}
	if p == echo.TCP && b[len(b)-1] != '\n' {
		b = append(append(make([]byte, 0, len(b)+1), b...), '\n')
	}
	return b
}

// ErrClass sorts probe outcomes into what a test expects of a Service.
type ErrClass int

// The classes of probe outcomes.
const (
	// OK: an echo answer came back.
	OK ErrClass = iota
	// Refused: the destination answered with a TCP RST to the SYN, or an ICMP port
	// unreachable (nothing listens, or a REJECT rule for a Service without endpoints).
	Refused
	// Timeout: no answer within the timeout (packets dropped or blackholed).
	Timeout
	// Unreachable: no route, or an ICMP host/network unreachable, or the neighbour did not
	// answer.
	Unreachable
	// Reset: the connection was established and then reset.
	Reset
	// Other: anything else (a malformed answer, a refusal to probe, a closed prober).
	Other
)

// String names the class as it appears in reports.
func (c ErrClass) String() string {
	switch c {
	case OK:
		return "ok"
	case Refused:
		return "refused"
	case Timeout:
		return "timeout"
	case Unreachable:
		return "unreachable"
	case Reset:
		return "reset"
	default:
		return "other"
	}
}

// Classify sorts an error of a probe into its class; nil is OK.
func Classify(err error) ErrClass {
	var nerr net.Error
	switch {
	case err == nil:
		return OK
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN):
		return Unreachable
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return Reset
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ETIMEDOUT), errors.As(err, &nerr) && nerr.Timeout():
		return Timeout
	default:
		return Other
	}
}

// Result is the outcome of one probe.
type Result struct {
	// Answer is what the echo server said: which pod answered and the client address it
	// saw. Zero unless Class is OK and the probe asked for an answer.
	Answer echo.Answer
	// Local is the probe's own source address and port, once its socket was bound.
	Local netip.AddrPort
	// Connect is the TCP connect latency (SYN to established). Zero for UDP.
	Connect time.Duration
	// Total is the latency from the start of the connect (TCP) or the send (UDP) to the
	// parsed answer. For Prober.Connect it equals Connect.
	Total time.Duration
	// Err is why the probe failed; nil when Class is OK.
	Err error
	// Class sorts Err.
	Class ErrClass
}

// fail fills Err and Class.
func (r Result) fail(err error) Result {
	r.Err, r.Class = err, Classify(err)
	return r
}
