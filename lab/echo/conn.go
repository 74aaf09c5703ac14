package echo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Bounds of one TCP connection.
const (
	// DefaultIdleTimeout is how long a TCP connection may stay silent before the server
	// closes it (DefaultIdleTimeout).
	DefaultIdleTimeout = 60 * time.Second
	// writeTimeout bounds every write, so that a client that stops reading cannot hold a
	// goroutine forever.
	writeTimeout = 10 * time.Second
	// maxHeaderLines bounds the header section of one HTTP request.
	maxHeaderLines = 100
	// maxBody bounds the HTTP request body the server reads and discards.
	maxBody = 1 << 20
)

// errLineTooLong reports a line longer than MaxLineLength.
var errLineTooLong = errors.New("line longer than 4096 bytes")

// router answers an HTTP request target it knows (netexec's paths); ok is false for the
// others, which get the answer line.
type router func(ctx context.Context, target string) (r reply, ok bool)

// tcpSession serves one accepted TCP connection: plain lines and HTTP/1.x requests, in any
// mix, until EOF, an error or the idle timeout.
type tcpSession struct {
	ctx    context.Context // ends when the server closes
	conn   net.Conn
	br     *bufio.Reader
	answer []byte // the answer line with its newline; fixed for the connection
	route  router // nil: every HTTP request gets the answer line
	idle   time.Duration
	out    []byte // reused response buffer
}

// serveTCP serves conn until it ends. It does not close conn. HTTP requests whose target
// route knows get route's reply, every other request and line the answer line.
func serveTCP(ctx context.Context, conn net.Conn, answer []byte, idle time.Duration, route router) {
	s := &tcpSession{ctx: ctx, conn: conn, br: bufio.NewReaderSize(conn, MaxLineLength), answer: answer, route: route, idle: idle}
	for {
		line, err := s.readLine()
		if errors.Is(err, errLineTooLong) {
			_ = s.write([]byte("error: " + errLineTooLong.Error() + "\n"))
			return
		}
		if len(line) == 0 && err != nil {
			return // EOF, idle timeout, reset, or closed by Server.Close
		}
		if isHTTPRequestLine(line) {
			if !s.serveHTTP(line) {
				return
			}
			continue
		}
		if s.write(s.answer) != nil || err != nil {
			return // the last line had no newline: answer it, then stop
		}
	}
}

// readLine reads one line, newline included, within the idle timeout. A line cut by EOF is
// returned with the error.
func (s *tcpSession) readLine() ([]byte, error) {
	if err := s.conn.SetReadDeadline(time.Now().Add(s.idle)); err != nil {
		return nil, err
	}
	line, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, errLineTooLong
	}
	return line, err
}

// write writes b within writeTimeout.
func (s *tcpSession) write(b []byte) error {
	if err := s.conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	_, err := s.conn.Write(b)
	return err
}

// isHTTPRequestLine reports whether line looks like `METHOD target HTTP/1.x`.
func isHTTPRequestLine(line []byte) bool {
	method, target, proto, ok := splitRequestLine(line)
	if !ok || target == "" || len(method) > 16 || !strings.HasPrefix(proto, "HTTP/1.") || len(proto) != len("HTTP/1.1") {
		return false
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; c < 'A' || c > 'Z' {
			return false
		}
	}
	return method != ""
}

// splitRequestLine splits an HTTP request line into its three parts.
func splitRequestLine(line []byte) (method, target, proto string, ok bool) {
	l := strings.TrimRight(string(line), "\r\n")
	method, rest, ok1 := strings.Cut(l, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	return method, target, proto, ok1 && ok2 && !strings.Contains(proto, " ")
}

// serveHTTP reads the rest of one HTTP/1.x request whose request line is line, answers it
// and reports whether the connection stays open (keep-alive).
func (s *tcpSession) serveHTTP(line []byte) bool {
	method, target, proto, _ := splitRequestLine(line)
	keepAlive := proto == "HTTP/1.1"
	contentLength := int64(0)
	chunked := false
	for n := 0; ; n++ {
		if n == maxHeaderLines {
			s.httpError(431, "Request Header Fields Too Large")
			return false
		}
		h, err := s.readLine()
		if errors.Is(err, errLineTooLong) {
			s.httpError(431, "Request Header Fields Too Large")
			return false
		}
		if err != nil {
			return false
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := strings.Cut(string(h), ":")
		if !ok {
			s.httpError(400, "Bad Request")
			return false
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "connection":
			for _, tok := range strings.Split(value, ",") {
				switch strings.ToLower(strings.TrimSpace(tok)) {
				case "close":
					keepAlive = false
				case "keep-alive":
					keepAlive = true
				}
			}
		case "content-length":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				s.httpError(400, "Bad Request")
				return false
			}
			contentLength = n
		case "transfer-encoding":
			chunked = !strings.EqualFold(value, "identity")
		}
	}
	if chunked {
		s.httpError(501, "Not Implemented")
		return false
	}
	if contentLength > maxBody {
		s.httpError(413, "Content Too Large")
		return false
	}
	if contentLength > 0 {
		if err := s.conn.SetReadDeadline(time.Now().Add(s.idle)); err != nil {
			return false
		}
		if _, err := io.CopyN(io.Discard, s.br, contentLength); err != nil {
			return false
		}
	}
	r := reply{status: http.StatusOK, body: s.answer}
	if s.route != nil {
		if rr, ok := s.route(s.ctx, target); ok {
			r = rr
		}
	}
	if r.status == http.StatusNoContent || r.status == http.StatusNotModified {
		r.body = nil // these answers have no body (RFC 9110 6.4.1)
	}
	b := append(s.out[:0], "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(r.status)...)
	b = append(b, "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(r.body)), 10)
	switch {
	case !keepAlive:
		b = append(b, "\r\nConnection: close"...)
	case proto == "HTTP/1.0":
		b = append(b, "\r\nConnection: keep-alive"...)
	}
	b = append(b, "\r\n\r\n"...)
	if method != "HEAD" {
		b = append(b, r.body...)
	}
	s.out = b
	return s.write(b) == nil && keepAlive
}

// httpError answers with an error status and no body; the caller closes the connection.
func (s *tcpSession) httpError(code int, text string) {
	_ = s.write([]byte("HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
}
