package echo

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testAnswer = "pod=web-1 ip=10.244.1.5 node=node-1 client=10.0.0.1:40312 port=80 proto=tcp\n"

// startSession serves one in-memory connection as the server does, and returns the client
// end and a channel closed when the session has ended (and closed its end).
func startSession(t *testing.T, idle time.Duration) (net.Conn, <-chan struct{}) {
	t.Helper()
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveTCP(context.Background(), server, []byte(testAnswer), idle, nil)
		_ = server.Close()
	}()
	t.Cleanup(func() {
		_ = client.Close()
		<-done
	})
	require.NoError(t, client.SetDeadline(time.Now().Add(10*time.Second)))
	return client, done
}

func httpResponse(extra string, body bool) string {
	r := "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
		strconv.Itoa(len(testAnswer)) + extra + "\r\n\r\n"
	if body {
		r += testAnswer
	}
	return r
}

func TestServeTCP(t *testing.T) {
	get := "GET / HTTP/1.1\r\nHost: 10.96.0.1\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n"
	tests := []struct {
		name   string
		in     string
		want   string
		closes bool // the server ends the connection after want
	}{
		{name: "plain line", in: "hello\n", want: testAnswer},
		{name: "empty line", in: "\n", want: testAnswer},
		{name: "three lines", in: "a\nb\r\nc\n", want: testAnswer + testAnswer + testAnswer},
		{name: "http/1.1 keep-alive, two requests", in: get + get, want: httpResponse("", true) + httpResponse("", true)},
		{name: "http/1.1 then a plain line", in: get + "x\n", want: httpResponse("", true) + testAnswer},
		{name: "http/1.1 connection close", in: "GET /a HTTP/1.1\r\nConnection: close\r\n\r\n", want: httpResponse("\r\nConnection: close", true), closes: true},
		{name: "http/1.0 closes", in: "GET / HTTP/1.0\r\n\r\n", want: httpResponse("\r\nConnection: close", true), closes: true},
		{name: "http/1.0 keep-alive", in: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n" + "x\n", want: httpResponse("\r\nConnection: keep-alive", true) + testAnswer},
		{name: "head has no body", in: "HEAD / HTTP/1.1\r\n\r\n" + "x\n", want: httpResponse("", false) + testAnswer},
		{name: "post body is skipped", in: "POST /p HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello\nworld" + "x\n", want: httpResponse("", true) + testAnswer},
		{name: "chunked is not implemented", in: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", want: "HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", closes: true},
		{name: "bad content length", in: "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", want: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", closes: true},
		{name: "body too large", in: "POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", want: "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", closes: true},
		{name: "header without colon", in: "GET / HTTP/1.1\r\nbroken\r\n\r\n", want: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", closes: true},
		{name: "header line too long", in: "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", MaxLineLength) + "\r\n\r\n", want: "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", closes: true},
		{name: "too many headers", in: "GET / HTTP/1.1\r\n" + strings.Repeat("X: y\r\n", maxHeaderLines+1) + "\r\n", want: "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", closes: true},
		{name: "plain line too long", in: strings.Repeat("a", MaxLineLength+1) + "\n", want: "error: line longer than 4096 bytes\n", closes: true},
		{name: "line of exactly the limit", in: strings.Repeat("a", MaxLineLength-1) + "\n", want: testAnswer},
		{name: "lower-case method is a plain line", in: "get / HTTP/1.1\n", want: testAnswer},
		{name: "HTTP/2 preface is a plain line", in: "PRI * HTTP/2.0\r\n", want: testAnswer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, done := startSession(t, time.Minute)
			go func() { _, _ = io.WriteString(client, tt.in) }() // fails once the server closes
			got := make([]byte, len(tt.want))
			_, err := io.ReadFull(client, got)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			if tt.closes {
				<-done
				return
			}
			select {
			case <-done:
				t.Fatal("server closed a connection that should stay open")
			default:
			}
		})
	}
}

func TestServeTCPHTTPResponseParses(t *testing.T) {
	client, _ := startSession(t, time.Minute)
	br := bufio.NewReader(client)
	for i := range 2 {
		req, err := http.NewRequest(http.MethodGet, "http://10.96.0.1/", nil)
		require.NoError(t, err)
		go func() { _ = req.Write(client) }()
		resp, err := http.ReadResponse(br, req)
		require.NoError(t, err, "request %d", i)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.False(t, resp.Close, "keep-alive")
		a, err := ParseAnswer(string(body))
		require.NoError(t, err)
		assert.Equal(t, "web-1", a.Pod)
	}
}

func TestServeTCPIdleTimeout(t *testing.T) {
	client, done := startSession(t, 50*time.Millisecond)
	_, err := client.Read(make([]byte, 1))
	// The server gave up first: EOF, not our own 10 s deadline.
	require.ErrorIs(t, err, io.EOF)
	var nerr net.Error
	assert.False(t, errors.As(err, &nerr) && nerr.Timeout())
	<-done
}
