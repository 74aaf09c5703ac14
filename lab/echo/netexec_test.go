package echo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testNetexec returns the netexec handler of a connection from 10.0.0.1:40312 to port 8080
// of pod web-1, whose dials are plain loopback dials (the tests' targets listen on
// 127.0.0.1 in the test's own namespace).
func testNetexec(shuttingDown *atomic.Bool) *netexec {
	var d net.Dialer
	return &netexec{
		hostname: "web-1", port: 8080, client: netip.MustParseAddrPort("10.0.0.1:40312"),
		shuttingDown: shuttingDown.Load, dial: d.DialContext,
	}
}

func TestNetexecPaths(t *testing.T) {
	tests := []struct {
		target     string
		terminated bool
		wantStatus int
		wantBody   string
		notOurs    bool // the answer line's, not netexec's
	}{
		{target: "/hostname", wantStatus: 200, wantBody: "web-1"},
		{target: "/hostName", wantStatus: 200, wantBody: "web-1"},
		{target: "//hostname", wantStatus: 200, wantBody: "web-1"},
		{target: "http://10.96.0.10/hostname?x=1", wantStatus: 200, wantBody: "web-1"},
		{target: "/clientip", wantStatus: 200, wantBody: "10.0.0.1:40312"},
		{target: "/serverport", wantStatus: 200, wantBody: "8080"},
		{target: "/healthz", wantStatus: 200, wantBody: ""},
		{target: "/readyz", wantStatus: 200, wantBody: "ok"},
		{target: "/readyz", terminated: true, wantStatus: 503, wantBody: "shutting down"},
		{target: "/healthz", terminated: true, wantStatus: 200, wantBody: ""},
		{target: "/echo?msg=hello%20there", wantStatus: 200, wantBody: "hello there"},
		{target: "/echo?msg=gone&code=410", wantStatus: 410, wantBody: "gone"},
		{target: "/echo?msg=x&code=abc", wantStatus: 200, wantBody: "argument 'code' must be an integer or empty, got \"abc\"\n"},
		{target: "/echo?code=99", wantStatus: 400, wantBody: "argument 'code' must be 200-599 in the kpbench echo server, got 99\n"},
		{target: "/shell?cmd=id", wantStatus: 501, wantBody: "/shell is not supported by the kpbench echo server (lab pods run no processes and have no files)\n"},
		{target: "/exit?code=1", wantStatus: 501, wantBody: "/exit is not supported by the kpbench echo server (lab pods run no processes and have no files)\n"},
		{target: "/", notOurs: true},
		{target: "/anything", notOurs: true},
		{target: "*", notOurs: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s terminated=%t", tt.target, tt.terminated), func(t *testing.T) {
			var down atomic.Bool
			down.Store(tt.terminated)
			r, ok := testNetexec(&down).serve(context.Background(), tt.target)
			if tt.notOurs {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.wantStatus, r.status)
			assert.Equal(t, tt.wantBody, string(r.body))
		})
	}
}

// udpEcho answers every datagram on a loopback socket with "pong:" and the datagram, until
// the test ends.
func udpEcho(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo(append([]byte("pong:"), buf[:n]...), from)
		}
	}()
	return c.LocalAddr().String()
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestNetexecDial(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path=%s query=%s", r.URL.Path, r.URL.RawQuery)
	}))
	t.Cleanup(web.Close)
	webAddr := netip.MustParseAddrPort(strings.TrimPrefix(web.URL, "http://"))
	udpAddr := netip.MustParseAddrPort(udpEcho(t))
	refused := netip.MustParseAddrPort(closedPort(t))
	dial := func(request string, ap netip.AddrPort, protocol string, tries string) string {
		q := fmt.Sprintf("/dial?request=%s&host=%s&port=%d&protocol=%s&tries=%s", request, ap.Addr(), ap.Port(), protocol, tries)
		return q
	}

	tests := []struct {
		name       string
		target     string
		wantStatus int
		wantBody   string
		// or, for answers that carry kernel error texts:
		wantResponses []string
		wantErrors    int
	}{
		{name: "http, two tries", target: dial("hostname", webAddr, "http", "2"), wantStatus: 200,
			wantResponses: []string{"path=/hostname query=", "path=/hostname query="}},
		{name: "http is the default protocol, one try by default", target: fmt.Sprintf("/dial?request=echo%%3Fmsg%%3Dhi&host=%s&port=%d", webAddr.Addr(), webAddr.Port()), wantStatus: 200,
			wantResponses: []string{"path=/echo query=msg=hi"}},
		{name: "udp", target: dial("hostname", udpAddr, "udp", "1"), wantStatus: 200, wantResponses: []string{"pong:hostname"}},
		{name: "refused: errors only, still 200", target: dial("hostname", refused, "http", "3"), wantStatus: 200, wantErrors: 3},
		{name: "no request", target: fmt.Sprintf("/dial?host=%s&port=%d", webAddr.Addr(), webAddr.Port()), wantStatus: 400, wantBody: "request parameter not specified.\n"},
		{name: "bad tries", target: dial("hostname", webAddr, "http", "x"), wantStatus: 400, wantBody: "tries parameter is invalid. strconv.Atoi: parsing \"x\": invalid syntax\n"},
		{name: "too many tries", target: dial("hostname", webAddr, "http", "101"), wantStatus: 400, wantBody: "tries parameter is invalid. 101 is more than the kpbench echo server's 100\n"},
		{name: "sctp", target: dial("hostname", webAddr, "sctp", "1"), wantStatus: 400, wantBody: "unsupported protocol. sctp\n"},
		{name: "a host name needs DNS", target: "/dial?request=hostname&host=web.default.svc&port=80", wantStatus: 400,
			wantBody: "host and/or port param are invalid. host \"web.default.svc\": the lab has no DNS, give an IP address: ParseAddr(\"web.default.svc\"): unexpected character (at \"web.default.svc\")\n"},
		{name: "bad port", target: "/dial?request=hostname&host=10.0.0.1&port=70000", wantStatus: 400,
			wantBody: "host and/or port param are invalid. port \"70000\": strconv.ParseUint: parsing \"70000\": value out of range\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var down atomic.Bool
			r, ok := testNetexec(&down).serve(context.Background(), tt.target)
			require.True(t, ok)
			assert.Equal(t, tt.wantStatus, r.status, "body %s", r.body)
			if tt.wantBody != "" {
				assert.Equal(t, tt.wantBody, string(r.body))
				return
			}
			var out map[string][]string
			require.NoError(t, json.Unmarshal(r.body, &out), "body %s", r.body)
			assert.Equal(t, tt.wantResponses, out["responses"])
			assert.Len(t, out["errors"], tt.wantErrors, "errors %v", out["errors"])
			if tt.wantErrors > 0 {
				assert.Contains(t, out["errors"][0], "connection refused")
			}
		})
	}
}

// TestNetexecDialLastTryDecides: like netexec, "responses" is listed only when the last try
// got an answer, even if earlier tries did.
func TestNetexecDialLastTryDecides(t *testing.T) {
	var calls atomic.Int32
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 2 {
			// The second try's connection dies without an answer.
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
			return
		}
		fmt.Fprint(w, "web-1")
	}))
	t.Cleanup(web.Close)
	ap := netip.MustParseAddrPort(strings.TrimPrefix(web.URL, "http://"))
	var down atomic.Bool
	r, ok := testNetexec(&down).serve(context.Background(), fmt.Sprintf("/dial?request=hostname&host=%s&port=%d&tries=2", ap.Addr(), ap.Port()))
	require.True(t, ok)
	var out map[string][]string
	require.NoError(t, json.Unmarshal(r.body, &out))
	assert.NotContains(t, out, "responses", "the last try failed")
	assert.Len(t, out["errors"], 1)
}

// TestNetexecDialEndsWithServer: a /dial in progress gives up when the server closes.
func TestNetexecDialEndsWithServer(t *testing.T) {
	// A UDP target that never answers: each try would wait 5 s.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	ap := netip.MustParseAddrPort(silent.LocalAddr().String())
	ctx, cancel := context.WithCancel(context.Background())
	var down atomic.Bool
	done := make(chan reply)
	go func() {
		r, _ := testNetexec(&down).serve(ctx, fmt.Sprintf("/dial?request=x&host=%s&port=%d&protocol=udp&tries=100", ap.Addr(), ap.Port()))
		done <- r
	}()
	cancel()
	select {
	case r := <-done:
		assert.Equal(t, 200, r.status)
		assert.Contains(t, string(r.body), "context canceled")
	case <-time.After(10 * time.Second):
		t.Fatal("/dial did not end with its context")
	}
}

func TestUDPCommand(t *testing.T) {
	client := netip.MustParseAddrPort("10.0.0.1:5353")
	tests := []struct {
		datagram, want string
		notOurs        bool
	}{
		{datagram: "hostname", want: "web-1"},
		{datagram: "  HostName\n", want: "web-1"},
		{datagram: "clientip", want: "10.0.0.1:5353"},
		{datagram: "serverport", want: "8081"},
		{datagram: "echo Hello World", want: "hello world"},
		{datagram: "echo ", notOurs: true}, // trimmed to "echo": netexec answers nothing, we the answer line
		{datagram: "kpbench probe\n", notOurs: true},
		{datagram: "", notOurs: true},
	}
	for _, tt := range tests {
		t.Run(tt.datagram, func(t *testing.T) {
			got, ok := udpCommand("web-1", client, 8081, []byte(tt.datagram))
			if tt.notOurs {
				assert.False(t, ok, "answered %q", got)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

// TestServeTCPNetexec: a session routes netexec's paths, keeps the answer line for the
// others, and keeps the connection alive across both.
func TestServeTCPNetexec(t *testing.T) {
	client, server := net.Pipe()
	var down atomic.Bool
	nx := testNetexec(&down)
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveTCP(context.Background(), server, []byte(testAnswer), time.Minute, nx.serve)
		_ = server.Close()
	}()
	t.Cleanup(func() { client.Close(); <-done })
	require.NoError(t, client.SetDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(client)
	for _, tt := range []struct {
		path   string
		status int
		body   string
	}{
		{"/hostname", 200, "web-1"},
		{"/", 200, testAnswer},
		{"/echo?msg=teapot&code=418", 418, "teapot"},
		{"/echo?msg=dropped&code=204", 204, ""},
		{"/clientip", 200, "10.0.0.1:40312"},
	} {
		req, err := http.NewRequest(http.MethodGet, "http://10.96.0.1"+tt.path, nil)
		require.NoError(t, err)
		go func() { _ = req.Write(client) }()
		resp, err := http.ReadResponse(br, req)
		require.NoError(t, err, tt.path)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, tt.status, resp.StatusCode, tt.path)
		assert.Equal(t, tt.body, string(body), tt.path)
		assert.False(t, resp.Close, "keep-alive after %s", tt.path)
	}
}
