package echo

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol is an L4 protocol as Kubernetes spells it ("TCP", "UDP"). Any string type holding
// a Kubernetes protocol (corev1.Protocol, backends.Protocol) converts to it.
type Protocol string

// The protocols the echo server serves.
const (
	TCP Protocol = "TCP"
	UDP Protocol = "UDP"
)

// MaxLineLength bounds every line the echo server reads (a plain request line, an HTTP
// request line or header line) and every answer line ParseAnswer accepts, newline included.
const MaxLineLength = 4096

// Answer is what an echo server says about itself and about the connection it served. One
// answer is one line:
//
//	pod=<pod> ip=<podIP> node=<node> client=<ip:port seen> port=<local port> proto=tcp|udp
type Answer struct {
	// Pod is the name of the pod that answered.
	Pod string
	// PodIP is the answering pod's IP address, in canonical form.
	PodIP string
	// Node is the node that hosts the pod.
	Node string
	// Client is the source address and port of the request as the pod saw it (after any
	// DNAT and SNAT on the way). IPv4-mapped IPv6 addresses are unmapped.
	Client netip.AddrPort
	// Port is the pod's local port that received the request.
	Port int32
	// Protocol is TCP or UDP.
	Protocol Protocol
}

// String renders the answer line, without its trailing newline.
func (a Answer) String() string {
	return string(a.appendLine(nil))
}

// appendLine appends the answer line, without a trailing newline, to b.
func (a Answer) appendLine(b []byte) []byte {
	b = append(b, "pod="...)
	b = append(b, a.Pod...)
	b = append(b, " ip="...)
	b = append(b, a.PodIP...)
	b = append(b, " node="...)
	b = append(b, a.Node...)
	b = append(b, " client="...)
	b = a.Client.AppendTo(b)
	b = append(b, " port="...)
	b = strconv.AppendInt(b, int64(a.Port), 10)
	b = append(b, " proto="...)
	b = append(b, strings.ToLower(string(a.Protocol))...)
	return b
}

// ParseAnswer parses one answer line as the echo server writes it. A trailing "\n" or
// "\r\n" is allowed. The parser is strict: the six fields must all be present, in order,
// separated by single spaces, made of printable ASCII, and their values must be valid.
func ParseAnswer(line string) (Answer, error) {
	var a Answer
	if len(line) > MaxLineLength {
		return a, fmt.Errorf("parse echo answer: line of %d bytes, longer than %d", len(line), MaxLineLength)
	}
	s := strings.TrimSuffix(line, "\n")
	s = strings.TrimSuffix(s, "\r")
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return a, fmt.Errorf("parse echo answer %q: byte %#x at %d is not printable ASCII", line, c, i)
		}
	}
	answerKeys := [...]string{"pod", "ip", "node", "client", "port", "proto"}
	fields := strings.Split(s, " ")
	if len(fields) != len(answerKeys) {
		return a, fmt.Errorf("parse echo answer %q: %d fields, want %d (%s)", line, len(fields), len(answerKeys), strings.Join(answerKeys[:], " "))
	}
	var vals [6]string
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != answerKeys[i] {
			return a, fmt.Errorf("parse echo answer %q: field %d is %q, want %s=<value>", line, i+1, f, answerKeys[i])
		}
		if v == "" {
			return a, fmt.Errorf("parse echo answer %q: %s is empty", line, k)
		}
		vals[i] = v
	}
	a.Pod, a.Node = vals[0], vals[2]
	ip, err := netip.ParseAddr(vals[1])
	if err != nil {
		return Answer{}, fmt.Errorf("parse echo answer %q: ip: %w", line, err)
	}
	a.PodIP = ip.String()
	if a.Client, err = netip.ParseAddrPort(vals[3]); err != nil {
		return Answer{}, fmt.Errorf("parse echo answer %q: client: %w", line, err)
	}
	port, err := strconv.ParseUint(vals[4], 10, 16)
	if err != nil || port == 0 {
		return Answer{}, fmt.Errorf("parse echo answer %q: port %q is not in 1-65535", line, vals[4])
	}
	a.Port = int32(port)
	switch vals[5] {
	case "tcp":
		a.Protocol = TCP
	case "udp":
		a.Protocol = UDP
	default:
		return Answer{}, fmt.Errorf("parse echo answer %q: proto %q is not tcp or udp", line, vals[5])
	}
	return a, nil
}

// validValue reports whether v can be written as an answer field: not empty, printable
// ASCII without spaces.
func validValue(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("byte %#x at %d is not printable ASCII without spaces", c, i)
		}
	}
	return nil
}
