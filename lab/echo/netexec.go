package echo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// agnhost netexec's API (registry.k8s.io/e2e-test-images/agnhost, `agnhost netexec`), as far
// as a lab pod can honour it, so that probes written for agnhost work the same in the lab and
// on a real cluster. Paths and answers:
//
//	/hostname, /hostName  the pod's hostname (its name)                          200
//	/clientip             the client's address as the pod saw it, "ip:port"      200
//	/serverport           the local port the request came to                     200
//	/echo?msg=M&code=C    M, with status C (default 200; 200-599)                C
//	/healthz              empty body                                             200
//	/readyz               "ok"; "shutting down" once the pod is terminating      200 / 503
//	/dial?request=R&host=H&port=P&protocol=http|udp&tries=N
//	                      R sent N times from inside the pod to H:P (HTTP GET
//	                      http://H:P/R, or R as one UDP datagram), each within 5 s;
//	                      JSON {"responses":[...],"errors":[...]}                200 (400 on a bad parameter)
//	/shell /upload /exit /shutdown /redirect                                     501: no processes or files in lab pods
//
// Every other path, "/" included, keeps the echo server's own answer line (netexec answers
// "/" with "NOW: <time>"). UDP datagrams "hostname", "echo MSG", "clientip" and "serverport"
// get netexec's UDP answers; any other datagram gets the answer line.
//
// Where netexec's code and its help text differ, the code is followed: /dial answers 200
// also when the last try failed (the help text says 417), lists "responses" only when the
// last try got a non-empty answer, and the UDP "echo" answer is lower-cased (netexec
// lower-cases the whole datagram before it parses it). Differences that are ours: there is
// no DNS in the lab, so /dial's host must be an IP address; SCTP is not served; at most
// maxDialTries tries; /echo's code must be 200-599.

// maxDialTries bounds /dial's tries (netexec has no bound; a lab loop must have one).
const maxDialTries = 100

// dialTimeout bounds each try of /dial, as netexec's 5 s client timeout and UDP read deadline do.
const dialTimeout = 5 * time.Second

// reply is the status and body of one HTTP answer.
type reply struct {
	status int
	body   []byte
}

// dialFunc opens a connection from inside the pod's namespace.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// netexec answers agnhost netexec's paths for one connection to a pod.
type netexec struct {
	// hostname is what /hostname answers.
	hostname string
	// port is the pod's local port the connection came to.
	port int32
	// client is the connection's source as the pod saw it.
	client netip.AddrPort
	// shuttingDown reports whether the pod is terminating (/readyz fails then).
	shuttingDown func() bool
	// dial makes /dial's connections; they must start inside the pod.
	dial dialFunc
}

// serve answers an HTTP request for target (origin or absolute form) if its path is one of
// netexec's; ok is false for every other path.
func (n *netexec) serve(ctx context.Context, target string) (r reply, ok bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return reply{}, false
	}
	p := path.Clean("/" + u.Path) // Go's ServeMux, which netexec uses, redirects to the clean path
	q := u.Query()
	text := func(status int, format string, args ...any) (reply, bool) {
		return reply{status: status, body: fmt.Appendf(nil, format, args...)}, true
	}
	switch p {
	case "/hostname", "/hostName":
		return text(http.StatusOK, "%s", n.hostname)
	case "/clientip":
		return text(http.StatusOK, "%s", n.client)
	case "/serverport":
		return text(http.StatusOK, "%d", n.port)
	case "/healthz":
		return reply{status: http.StatusOK}, true
	case "/readyz":
		if n.shuttingDown != nil && n.shuttingDown() {
			return text(http.StatusServiceUnavailable, "shutting down")
		}
		return text(http.StatusOK, "ok")
	case "/echo":
		status := http.StatusOK
		if c := q.Get("code"); c != "" {
			code, err := strconv.Atoi(c)
			if err != nil {
				return text(http.StatusOK, "argument 'code' must be an integer or empty, got %q\n", c)
			}
			if code < 200 || code > 599 {
				return text(http.StatusBadRequest, "argument 'code' must be 200-599 in the kpbench echo server, got %d\n", code)
			}
			status = code
		}
		return text(status, "%s", q.Get("msg"))
	case "/dial":
		return n.dialHandler(ctx, q)
	case "/shell", "/upload", "/exit", "/shutdown", "/redirect":
		return text(http.StatusNotImplemented, "%s is not supported by the kpbench echo server (lab pods run no processes and have no files)\n", p)
	}
	return reply{}, false
}

// dialHandler is netexec's /dial.
func (n *netexec) dialHandler(ctx context.Context, q url.Values) (reply, bool) {
	bad := func(format string, args ...any) (reply, bool) {
		return reply{status: http.StatusBadRequest, body: fmt.Appendf(nil, format+"\n", args...)}, true
	}
	tries := 1
	if t := q.Get("tries"); t != "" {
		var err error
		if tries, err = strconv.Atoi(t); err != nil {
			return bad("tries parameter is invalid. %v", err)
		}
		if tries > maxDialTries {
			return bad("tries parameter is invalid. %d is more than the kpbench echo server's %d", tries, maxDialTries)
		}
	}
	request := q.Get("request")
	if request == "" {
		return bad("request parameter not specified.")
	}
	host, port := q.Get("host"), q.Get("port")
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return bad("host and/or port param are invalid. host %q: the lab has no DNS, give an IP address: %v", host, err)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return bad("host and/or port param are invalid. port %q: %v", port, err)
	}
	addr := netip.AddrPortFrom(ip, uint16(pn)).String()
	var try func(context.Context) (string, error)
	switch strings.ToLower(q.Get("protocol")) {
	case "", "http":
		try = func(ctx context.Context) (string, error) { return n.dialHTTP(ctx, addr, request) }
	case "udp":
		try = func(ctx context.Context) (string, error) { return n.dialUDP(ctx, addr, request) }
	default:
		return bad("unsupported protocol. %s", q.Get("protocol"))
	}
	responses, errs := []string{}, []string{}
	var last string
	for range tries {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err().Error())
			break
		}
		resp, err := try(ctx)
		last = resp
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		responses = append(responses, resp)
	}
	out := map[string][]string{}
	if last != "" {
		out["responses"] = responses
	}
	if len(errs) > 0 {
		out["errors"] = errs
	}
	body, err := json.Marshal(out)
	if err != nil {
		return reply{status: http.StatusExpectationFailed, body: fmt.Appendf(nil, "response could not be serialized. %v", err)}, true
	}
	return reply{status: http.StatusOK, body: body}, true
}

// dialHTTP GETs http://addr/request from inside the pod and returns the body.
func (n *netexec) dialHTTP(ctx context.Context, addr, request string) (string, error) {
	tr := &http.Transport{DialContext: n.dial, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: dialTimeout}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/%s", addr, request), nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", err
	}
	return string(body), nil
}

// dialUDP sends request as one datagram to addr from inside the pod and returns the answer.
func (n *netexec) dialUDP(ctx context.Context, addr, request string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := n.dial(ctx, "udp", addr)
	if err != nil {
		return "", fmt.Errorf("udp dial failed. err:%v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(request)); err != nil {
		return "", fmt.Errorf("udp connection write failed. err:%v", err)
	}
	deadline, _ := ctx.Deadline()
	_ = c.SetReadDeadline(deadline)
	buf := make([]byte, 2048)
	count, err := c.Read(buf)
	if err != nil || count == 0 {
		return "", fmt.Errorf("reading from udp connection failed. err:'%v'", err)
	}
	return string(buf[:count]), nil
}

// udpCommand answers netexec's UDP commands ("hostname", "echo MSG", "clientip",
// "serverport") for a datagram from client to the pod's port; ok is false for any other
// datagram. It allocates only for a command (it runs for every datagram a pod gets).
func udpCommand(hostname string, client netip.AddrPort, port int32, datagram []byte) (answer []byte, ok bool) {
	text := bytes.TrimSpace(datagram)
	switch {
	case bytes.EqualFold(text, []byte("hostname")):
		return []byte(hostname), true
	case bytes.EqualFold(text, []byte("clientip")):
		return []byte(client.String()), true
	case bytes.EqualFold(text, []byte("serverport")):
		return strconv.AppendInt(nil, int64(port), 10), true
	case len(text) >= 5 && bytes.EqualFold(text[:5], []byte("echo ")):
		return bytes.ToLower(text[5:]), true
	}
	return nil, false
}
