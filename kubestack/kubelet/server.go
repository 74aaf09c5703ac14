//go:build linux

package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// DefaultAPIPort is the kubelet API's port (a kubelet's --port).
const DefaultAPIPort = 10250

// Timeouts of the streaming connections: a kubelet's defaults (--streaming-connection-idle-
// timeout 4h; streams must be created within 30 s of the upgrade).
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = remotecommand.DefaultStreamCreationTimeout
)

// APIOptions configure the kubelet API of a node: exec, attach (refused), port-forward and
// container logs, as the API server proxies them for kubectl.
type APIOptions struct {
	// Port is the TCP port on the node's InternalIP (default DefaultAPIPort). The Node's
	// status.daemonEndpoints.kubeletEndpoint says it.
	Port int
	// Certificate is the serving certificate: for the node's InternalIP, signed by the
	// cluster's CA, which the API server checks it with (--kubelet-certificate-authority).
	Certificate tls.Certificate
	// ClientCAs verify client certificates. A request without a certificate that chains
	// to them is refused (401 Unauthorized), whatever it asks, but /healthz.
	ClientCAs *x509.CertPool
	// Authorizer decides what an authenticated user may do (default: a
	// SubjectAccessReview to the API server, as a kubelet with --authorization-mode=Webhook;
	// the API server's kubelet-client identity is bound to system:kubelet-api-admin).
	Authorizer Authorizer
}

// podHost is what the kubelet API acts on: the pods of the node, and how to exec, forward
// and read logs in them. The Kubelet is one; unit tests have their own.
type podHost interface {
	findPod(namespace, name string, uid types.UID) (podTarget, bool)
	exec(ctx context.Context, t podTarget, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error
	portForward(ctx context.Context, t podTarget, port int32, stream io.ReadWriteCloser) error
	containerLogs() ContainerLogs
}

// apiHandler serves the kubelet API's paths (a kubelet's pkg/kubelet/server routes):
//
//	GET /healthz                                            "ok", to anyone
//	GET|POST /exec/{ns}/{pod}[/{uid}]/{container}?command=… remotecommand (SPDY, WebSocket)
//	GET|POST /attach/{ns}/{pod}[/{uid}]/{container}         refused: no process to attach
//	GET|POST /portForward/{ns}/{pod}[/{uid}]                port-forward (SPDY, WebSocket)
//	GET /containerLogs/{ns}/{pod}/{container}?follow=…      the container's log
//
// and 404 for the rest (stats, metrics, pods, run, checkpoint, logs are not served).
type apiHandler struct {
	node  string
	host  podHost
	authz Authorizer
	log   *slog.Logger
	mux   *http.ServeMux
}

func newAPIHandler(node string, host podHost, authz Authorizer, log *slog.Logger) *apiHandler {
	h := &apiHandler{node: node, host: host, authz: authz, log: log, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		h.mux.HandleFunc("GET "+p, h.serveExec)
		h.mux.HandleFunc("POST "+p, h.serveExec)
	}
	for _, p := range []string{"/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"} {
		h.mux.HandleFunc("GET "+p, h.serveAttach)
		h.mux.HandleFunc("POST "+p, h.serveAttach)
	}
	for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		h.mux.HandleFunc("GET "+p, h.servePortForward)
		h.mux.HandleFunc("POST "+p, h.servePortForward)
	}
	h.mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", h.serveLogs)
	return h
}

// ServeHTTP authenticates (a verified client certificate), authorizes (Authorizer), then
// routes. Only /healthz is open to anonymous requests.
func (h *apiHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		h.mux.ServeHTTP(w, r)
		return
	}
	u, ok := authenticate(r)
	if !ok {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	a := requestAttributes(r, h.node)
	allowed, reason, err := h.authz.Authorize(r.Context(), u, a)
	if err != nil {
		h.log.Warn("kubelet API: authorization", "user", u.Name, "err", err)
		http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Name, a.Verb, a.Subresource), http.StatusInternalServerError)
		return
	}
	if !allowed {
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Name, a.Verb, a.Subresource)
		if reason != "" {
			msg += ": " + reason
		}
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// pod finds the request's pod, or answers 404.
func (h *apiHandler) pod(w http.ResponseWriter, r *http.Request) (podTarget, bool) {
	t, ok := h.host.findPod(r.PathValue("ns"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s does not exist on node %s", r.PathValue("ns"), r.PathValue("pod"), h.node), http.StatusNotFound)
	}
	return t, ok
}

// container checks that the pod has the request's container, or answers 404.
func (h *apiHandler) container(w http.ResponseWriter, r *http.Request, t podTarget) bool {
	name := r.PathValue("container")
	if podContainer(t.pod, name) == nil {
		http.Error(w, fmt.Sprintf("container %q not found in pod %s/%s", name, t.pod.Namespace, t.pod.Name), http.StatusNotFound)
		return false
	}
	return true
}

// streamRequest reads what exec and attach share: the streams asked for, the pod and the
// container; it answers the errors itself.
func (h *apiHandler) streamRequest(w http.ResponseWriter, r *http.Request) (*remotecommand.Options, podTarget, bool) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, podTarget{}, false
	}
	t, ok := h.pod(w, r)
	if !ok || !h.container(w, r, t) {
		return nil, podTarget{}, false
	}
	return opts, t, true
}

func (h *apiHandler) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, t, ok := h.streamRequest(w, r)
	if !ok {
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "no command", http.StatusBadRequest)
		return
	}
	remotecommand.ServeExec(w, r, execAdapter{h.host, t}, t.pod.Name, string(t.pod.UID), r.PathValue("container"), cmd,
		opts, streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

func (h *apiHandler) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, t, ok := h.streamRequest(w, r)
	if !ok {
		return
	}
	remotecommand.ServeAttach(w, r, noAttach{}, t.pod.Name, string(t.pod.UID), r.PathValue("container"),
		opts, streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

func (h *apiHandler) servePortForward(w http.ResponseWriter, r *http.Request) {
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	t, ok := h.pod(w, r)
	if !ok {
		return
	}
	portforward.ServePortForward(w, r, forwardAdapter{h.host, t}, t.pod.Name, string(t.pod.UID), opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

func (h *apiHandler) serveLogs(w http.ResponseWriter, r *http.Request) {
	opts, err := parseLogOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	t, ok := h.pod(w, r)
	if !ok || !h.container(w, r, t) {
		return
	}
	logs := h.host.containerLogs()
	if logs == nil {
		http.Error(w, "this node keeps no container logs", http.StatusNotFound)
		return
	}
	// Read fails before it writes anything (no such instance): an error status is
	// still possible until the first line.
	fw := &firstWrite{w: w}
	if err := logs.Read(r.Context(), t.ref(), r.PathValue("container"), opts, fw); err != nil && !fw.wrote {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// firstWrite sets the content type at the first write and flushes every write (a
// followed log must reach kubectl line by line).
type firstWrite struct {
	w     http.ResponseWriter
	wrote bool
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if !f.wrote {
		f.w.Header().Set("Content-Type", "text/plain")
		f.wrote = true
	}
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

// parseLogOptions reads the query of /containerLogs: the PodLogOptions the API server
// forwards (follow, previous, timestamps, sinceSeconds, sinceTime, tailLines, limitBytes,
// stream; "tail" is tailLines' old name).
func parseLogOptions(q map[string][]string) (*corev1.PodLogOptions, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	opts := &corev1.PodLogOptions{}
	var err error
	boolean := func(k string) bool {
		v := get(k)
		if v == "" {
			return false
		}
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("%s=%q: %w", k, v, perr))
		}
		return b
	}
	number := func(k string) *int64 {
		v := get(k)
		if v == "" {
			return nil
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 {
			err = errors.Join(err, fmt.Errorf("%s=%q: want a number >= 0", k, v))
			return nil
		}
		return &n
	}
	opts.Follow, opts.Previous, opts.Timestamps = boolean("follow"), boolean("previous"), boolean("timestamps")
	opts.SinceSeconds, opts.LimitBytes = number("sinceSeconds"), number("limitBytes")
	if t := get("tail"); t != "" && t != "all" && get("tailLines") == "" {
		q["tailLines"] = []string{t}
	}
	opts.TailLines = number("tailLines")
	if v := get("sinceTime"); v != "" {
		ts, perr := time.Parse(time.RFC3339, v)
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("sinceTime=%q: %w", v, perr))
		} else {
			mt := metav1.NewTime(ts)
			opts.SinceTime = &mt
		}
	}
	if v := get("stream"); v != "" {
		opts.Stream = &v
	}
	return opts, err
}

// execAdapter is the remotecommand.Executor of one request.
type execAdapter struct {
	host podHost
	t    podTarget
}

// ExecInContainer implements remotecommand.Executor.
func (e execAdapter) ExecInContainer(ctx context.Context, _, _, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	return e.host.exec(ctx, e.t, container, cmd, in, out, errOut, tty, resize)
}

// noAttach refuses attach: a lab container is no process with streams to attach to.
type noAttach struct{}

// AttachContainer implements remotecommand.Attacher.
func (noAttach) AttachContainer(context.Context, string, string, string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommand.TerminalSize) error {
	return errors.New("the lab kubelet cannot attach: its containers are no processes (use exec)")
}

// forwardAdapter is the portforward.PortForwarder of one request.
type forwardAdapter struct {
	host podHost
	t    podTarget
}

// PortForward implements portforward.PortForwarder.
func (f forwardAdapter) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	return f.host.portForward(ctx, f.t, port, stream)
}

// apiServer is a running kubelet API.
type apiServer struct {
	srv *http.Server
	l   net.Listener
	wg  chan struct{}
}

// serveAPI listens on addr (made by listen, inside the node's namespace) and serves h over
// TLS with opts' certificate, asking for client certificates.
func serveAPI(listen func() (net.Listener, error), h http.Handler, opts *APIOptions, log *slog.Logger) (*apiServer, error) {
	l, err := listen()
	if err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{opts.Certificate},
		ClientCAs:    opts.ClientCAs,
		// Asked for, verified when given; a request without one is refused in ServeHTTP
		// (401, as a kubelet answers), so that /healthz stays open.
		ClientAuth: tls.VerifyClientCertIfGiven,
		// HTTP/1.1 only: exec and port-forward upgrade the connection (SPDY, WebSocket).
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	}
	s := &apiServer{
		srv: &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 30 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)},
		l:  l,
		wg: make(chan struct{}),
	}
	go func() {
		defer close(s.wg)
		if err := s.srv.Serve(tls.NewListener(l, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("kubelet API stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr returns the address the API listens on.
func (s *apiServer) Addr() netip.AddrPort {
	return netip.MustParseAddrPort(s.l.Addr().String())
}

// close stops the server: listeners and every connection, streams included.
func (s *apiServer) close() {
	_ = s.srv.Close()
	<-s.wg
}
