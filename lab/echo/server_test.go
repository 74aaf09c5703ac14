//go:build linux

package echo_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/lab/probe/probetest"
)

// testID returns the identity of the test pod.
func testID() echo.Identity { return echo.Identity{Pod: "web-1", PodIP: "10.0.0.2", Node: "node-1"} }

// setup makes a namespace pair, an echo server in B and a prober in A.
func setup(t *testing.T, ports ...echo.Port) (probetest.Pair, *echo.Server, *probe.Prober) {
	t.Helper()
	pair := probetest.NewPair(t)
	srv, err := echo.Serve(pair.B.Path, testID(), ports)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	p, err := probe.New(pair.A.Path)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return pair, srv, p
}

func TestServeAnswers(t *testing.T) {
	pair, _, p := setup(t, echo.Port{Number: 8080, Protocol: echo.TCP}, echo.Port{Number: 8080, Protocol: echo.UDP}, echo.Port{Number: 53, Protocol: echo.UDP})
	tests := []struct {
		port  uint16
		proto echo.Protocol
	}{
		{8080, echo.TCP},
		{8080, echo.UDP},
		{53, echo.UDP},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%s", tt.port, tt.proto), func(t *testing.T) {
			res := p.Request(context.Background(), probe.Destination{Addr: netip.AddrPortFrom(pair.B.Addr, tt.port), Protocol: tt.proto}, probe.Options{})
			require.NoError(t, res.Err)
			assert.Equal(t, echo.Answer{
				Pod: "web-1", PodIP: "10.0.0.2", Node: "node-1",
				Client:   res.Local, // no NAT between A and B: the pod sees the prober's own address
				Port:     int32(tt.port),
				Protocol: tt.proto,
			}, res.Answer)
			assert.Equal(t, pair.A.Addr, res.Local.Addr())
		})
	}
}

func TestServeHTTPKeepAlive(t *testing.T) {
	pair, _, p := setup(t, echo.Port{Number: 80, Protocol: echo.TCP})
	client := &http.Client{Transport: &http.Transport{DialContext: p.DialContext}, Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(pair.B.Addr, 80))
	var clients []netip.AddrPort
	for i := range 2 {
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
		assert.Equal(t, int64(len(body)), resp.ContentLength)
		a, err := echo.ParseAnswer(string(body))
		require.NoError(t, err)
		assert.Equal(t, "web-1", a.Pod)
		assert.Equal(t, pair.A.Addr, a.Client.Addr())
		assert.Equal(t, i == 1, reused, "request %d: connection reused", i)
		clients = append(clients, a.Client)
	}
	assert.Equal(t, clients[0], clients[1], "both requests came over one connection")
}

func TestServeCurl(t *testing.T) {
	testutil.RequireBinary(t, "curl")
	pair, _, _ := setup(t, echo.Port{Number: 80, Protocol: echo.TCP})
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(pair.B.Addr, 80))
	// Two URLs in one curl run: the second request reuses the connection.
	out, err := netns.Exec(context.Background(), pair.A.Path, netns.Command{Path: "curl", Args: []string{"-sS", "--max-time", "5", url, url}})
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(out.Stdout), "\n"), "\n")
	require.Len(t, lines, 2, "stdout %q", out.Stdout)
	var answers []echo.Answer
	for _, l := range lines {
		a, err := echo.ParseAnswer(l)
		require.NoError(t, err)
		assert.Equal(t, "web-1", a.Pod)
		answers = append(answers, a)
	}
	assert.Equal(t, answers[0].Client, answers[1].Client, "curl kept the connection alive")
}

// socketsOnPort lists the lines of /proc/net/{tcp,tcp6,udp,udp6}, read inside the namespace
// at nsPath, whose local port is port.
func socketsOnPort(t *testing.T, nsPath string, port uint16) []string {
	t.Helper()
	var found []string
	require.NoError(t, netns.Do(nsPath, func() error {
		for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
			fh, err := os.Open("/proc/thread-self/net/" + f)
			if err != nil {
				return err
			}
			sc := bufio.NewScanner(fh)
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				if len(fields) > 1 && strings.HasSuffix(fields[1], fmt.Sprintf(":%04X", port)) {
					found = append(found, f+" "+sc.Text())
				}
			}
			fh.Close()
			if err := sc.Err(); err != nil {
				return err
			}
		}
		return nil
	}))
	return found
}

func TestCloseReleasesEverything(t *testing.T) {
	pair := probetest.NewPair(t)
	ports := []echo.Port{{Number: 9000, Protocol: echo.TCP}, {Number: 9000, Protocol: echo.UDP}}
	srv, err := echo.Serve(pair.B.Path, testID(), ports)
	require.NoError(t, err)
	p, err := probe.New(pair.A.Path)
	require.NoError(t, err)
	defer p.Close()
	target := probe.Destination{Addr: netip.AddrPortFrom(pair.B.Addr, 9000), Protocol: echo.TCP}

	// An open connection must not keep Close waiting for the idle timeout.
	conn, err := p.Dial(context.Background(), target, probe.Options{Timeout: 2 * time.Second})
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.Request(context.Background()).Err)
	require.NotEmpty(t, socketsOnPort(t, pair.B.Path, 9000))

	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	assert.Empty(t, socketsOnPort(t, pair.B.Path, 9000), "sockets left in the pod namespace")
	res := conn.Request(context.Background())
	assert.Error(t, res.Err, "the open connection was closed by the server")
	require.NoError(t, srv.Close(), "Close is idempotent")

	// The same ports can be served again.
	srv2, err := echo.Serve(pair.B.Path, testID(), ports)
	require.NoError(t, err)
	for _, proto := range []echo.Protocol{echo.TCP, echo.UDP} {
		res := p.Request(context.Background(), probe.Destination{Addr: target.Addr, Protocol: proto}, probe.Options{})
		require.NoError(t, res.Err, proto)
	}
	require.NoError(t, srv2.Close())

	// Nothing holds namespace B any more: once deleted, the kernel frees it, which destroys
	// its veth end and with it A's.
	require.NoError(t, netns.Delete(pair.B.Name))
	assert.Eventually(t, func() bool { return !probetest.LinkExists(t, pair.A) }, 10*time.Second, 20*time.Millisecond,
		"namespace B was not freed: something still holds it")
}

func TestServeRejects(t *testing.T) {
	pair := probetest.NewPair(t)
	tcp80 := []echo.Port{{Number: 80, Protocol: echo.TCP}}
	tests := []struct {
		name    string
		nsPath  string
		id      echo.Identity
		ports   []echo.Port
		wantErr string
	}{
		// The test goroutine's thread is in the host's namespace (no unlocked thread ever
		// leaves it). /proc/1/ns/net may not even be readable, see probe's tests.
		{name: "root namespace", nsPath: "/proc/thread-self/ns/net", id: testID(), ports: tcp80, wantErr: netns.ErrRootNamespace.Error()},
		{name: "no such namespace", nsPath: "/run/netns/kpb-none", id: testID(), ports: tcp80, wantErr: "no such file"},
		{name: "no pod name", nsPath: pair.B.Path, id: echo.Identity{PodIP: "10.0.0.2", Node: "n"}, ports: tcp80, wantErr: "pod name"},
		{name: "space in node name", nsPath: pair.B.Path, id: echo.Identity{Pod: "p", PodIP: "10.0.0.2", Node: "a b"}, ports: tcp80, wantErr: "node name"},
		{name: "bad pod IP", nsPath: pair.B.Path, id: echo.Identity{Pod: "p", PodIP: "x", Node: "n"}, ports: tcp80, wantErr: "pod IP"},
		{name: "no ports", nsPath: pair.B.Path, id: testID(), wantErr: "no ports"},
		{name: "port zero", nsPath: pair.B.Path, id: testID(), ports: []echo.Port{{Number: 0, Protocol: echo.TCP}}, wantErr: "1-65535"},
		{name: "sctp", nsPath: pair.B.Path, id: testID(), ports: []echo.Port{{Number: 80, Protocol: "SCTP"}}, wantErr: "TCP or UDP"},
		{name: "duplicate", nsPath: pair.B.Path, id: testID(), ports: []echo.Port{tcp80[0], tcp80[0]}, wantErr: "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := echo.Serve(tt.nsPath, tt.id, tt.ports)
			require.ErrorContains(t, err, tt.wantErr)
			assert.Nil(t, srv)
		})
	}

	t.Run("port in use leaves nothing open", func(t *testing.T) {
		srv, err := echo.Serve(pair.B.Path, testID(), tcp80)
		require.NoError(t, err)
		defer srv.Close()
		_, err = echo.Serve(pair.B.Path, testID(), []echo.Port{{Number: 81, Protocol: echo.UDP}, {Number: 80, Protocol: echo.TCP}})
		require.ErrorContains(t, err, "address already in use")
		assert.Empty(t, socketsOnPort(t, pair.B.Path, 81))
	})
}

// TestServeNetexec: agnhost netexec's API between two namespaces: HTTP paths, /dial from
// inside the pod (HTTP and UDP, to itself), UDP commands, /readyz after MarkShuttingDown.
func TestServeNetexec(t *testing.T) {
	pair, srv, p := setup(t, echo.Port{Number: 8080, Protocol: echo.TCP}, echo.Port{Number: 8081, Protocol: echo.UDP})
	client := &http.Client{Transport: &http.Transport{DialContext: p.DialContext}, Timeout: 15 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(fmt.Sprintf("http://%s%s", netip.AddrPortFrom(pair.B.Addr, 8080), path))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("/hostname")
	assert.Equal(t, 200, code)
	assert.Equal(t, "web-1", body)
	_, body = get("/clientip")
	ap, err := netip.ParseAddrPort(body)
	require.NoError(t, err, body)
	assert.Equal(t, pair.A.Addr, ap.Addr())

	// /dial runs inside B: to its own address, over HTTP and UDP.
	_, body = get(fmt.Sprintf("/dial?request=hostname&host=%s&port=8080&protocol=http&tries=2", pair.B.Addr))
	assert.JSONEq(t, `{"responses":["web-1","web-1"]}`, body)
	_, body = get(fmt.Sprintf("/dial?request=hostname&host=%s&port=8081&protocol=udp&tries=1", pair.B.Addr))
	assert.JSONEq(t, `{"responses":["web-1"]}`, body)
	_, body = get(fmt.Sprintf("/dial?request=clientip&host=%s&port=8080", pair.B.Addr))
	var out map[string][]string
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Len(t, out["responses"], 1, body)
	assert.True(t, strings.HasPrefix(out["responses"][0], pair.B.Addr.String()+":"), "the dial left from inside B: %s", body)
	_, body = get(fmt.Sprintf("/dial?request=hostname&host=%s&port=9&protocol=http", pair.B.Addr))
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	assert.Contains(t, strings.Join(out["errors"], ";"), "connection refused")

	// UDP commands from A.
	res := p.Request(context.Background(), probe.Destination{Addr: netip.AddrPortFrom(pair.B.Addr, 8081), Protocol: echo.UDP}, probe.Options{})
	require.NoError(t, res.Err, "other datagrams keep the answer line")
	assert.Equal(t, "web-1", res.Answer.Pod)

	code, body = get("/readyz")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok", body)
	srv.MarkShuttingDown()
	code, body = get("/readyz")
	assert.Equal(t, 503, code)
	assert.Equal(t, "shutting down", body)
	_, body = get("/hostname")
	assert.Equal(t, "web-1", body, "a pod shutting down still serves")
}

// TestServeHostname: Identity.Hostname is what /hostname answers (a pod's spec.hostname).
func TestServeHostname(t *testing.T) {
	testutil.RequireBinary(t, "curl")
	pair := probetest.NewPair(t)
	id := testID()
	id.Hostname = "custom"
	srv, err := echo.Serve(pair.B.Path, id, []echo.Port{{Number: 80, Protocol: echo.TCP}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	out, err := netns.Exec(context.Background(), pair.A.Path, netns.Command{Path: "curl", Args: []string{"-sS", "--max-time", "5", fmt.Sprintf("http://%s/hostname", pair.B.Addr)}})
	require.NoError(t, err)
	assert.Equal(t, "custom", string(out.Stdout))
	_, err = echo.Serve(pair.B.Path, echo.Identity{Pod: "p", PodIP: "10.0.0.2", Node: "n", Hostname: "a b"}, []echo.Port{{Number: 81, Protocol: echo.TCP}})
	assert.ErrorContains(t, err, "hostname")
}
