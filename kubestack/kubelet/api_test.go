//go:build linux

package kubelet

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	clientremotecommand "k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// TestMain lets the lab kubelet re-execute this test binary as its exec helper.
func TestMain(m *testing.M) {
	RunPodExecIfAsked()
	os.Exit(m.Run())
}

// testPKI is a CA, a serving certificate for 127.0.0.1 and client certificates.
type testPKI struct {
	t      *testing.T
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	server tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, key.Public(), key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &testPKI{t: t, ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	certPEM, keyPEM := p.issue("node-0", nil, true)
	p.server, err = tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return p
}

// issue returns a certificate and key (PEM) signed by the CA.
func (p *testPKI) issue(cn string, orgs []string, server bool) (certPEM, keyPEM []byte) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(p.t, err)
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, p.ca, key.Public(), p.caKey)
	require.NoError(p.t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(p.t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// restConfig is a client of the test server, with a client certificate for cn ("" for
// none).
func (p *testPKI) restConfig(host, cn string) *rest.Config {
	cfg := &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM}}
	if cn != "" {
		cfg.CertData, cfg.KeyData = p.issue(cn, nil, false)
	}
	return cfg
}

// httpClient is a client of the test server, with a client certificate for cn ("" for
// none).
func (p *testPKI) httpClient(cn string) *http.Client {
	p.t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cn != "" {
		cert, err := tls.X509KeyPair(p.issue(cn, nil, false))
		require.NoError(p.t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// allowOnly lets one user in.
type allowOnly struct{ user string }

func (a allowOnly) Authorize(_ context.Context, u User, at Attributes) (bool, string, error) {
	if u.Name == a.user && at.Subresource == "proxy" && at.Node == "node-0" {
		return true, "", nil
	}
	return false, "not the API server", nil
}

// fakeHost runs execs as plain processes (no namespaces: no root needed) and forwards to
// loopback ports.
type fakeHost struct {
	pods map[string]podTarget
	logs ContainerLogs
}

func (f *fakeHost) findPod(ns, name string, uid types.UID) (podTarget, bool) {
	t, ok := f.pods[ns+"/"+name]
	return t, ok && (uid == "" || uid == t.pod.UID)
}

func (f *fakeHost) exec(ctx context.Context, _ podTarget, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	e := procExecutor{argv: func(s podExecSpec) []string { return s.Argv }}
	return e.run(ctx, podExecSpec{Argv: cmd}, []string{execEnvPath}, in, out, errOut, tty, resize)
}

func (f *fakeHost) portForward(ctx context.Context, t podTarget, port int32, stream io.ReadWriteCloser) error {
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	splice(ctx, t.sb.ctx, conn, stream)
	return nil
}

func (f *fakeHost) containerLogs() ContainerLogs { return f.logs }

// startTestAPI serves the kubelet API of node-0 for one pod, default/web (container c), on
// a loopback port, letting in only the user "apiserver".
func startTestAPI(t *testing.T) (*testPKI, string, *fakeHost) {
	t.Helper()
	p := newTestPKI(t)
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	host := &fakeHost{pods: map[string]podTarget{"default/web": {pod: pod, sb: &sandbox{ctx: context.Background()}}},
		logs: FileLogs{Dir: t.TempDir()}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := serveAPI(func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
		newAPIHandler("node-0", host, allowOnly{"apiserver"}, log), &APIOptions{Certificate: p.server, ClientCAs: pool}, log)
	require.NoError(t, err)
	t.Cleanup(srv.close)
	return p, "https://" + srv.Addr().String(), host
}

// execURL is the kubelet API's exec URL of default/web's container c.
func execURL(t *testing.T, base string, tty, stdin bool, cmd ...string) *url.URL {
	q := url.Values{"command": cmd, "output": {"1"}}
	if !tty {
		q.Set("error", "1")
	} else {
		q.Set("tty", "1")
	}
	if stdin {
		q.Set("input", "1")
	}
	u, err := url.Parse(base + "/exec/default/web/c?" + q.Encode())
	require.NoError(t, err)
	return u
}

// TestAPIRefusesWithoutClientCertificate: every path but /healthz asks for a verified
// client certificate, and an exec without one is refused before anything runs; a
// certificate of another user is forbidden.
func TestAPIRefusesWithoutClientCertificate(t *testing.T) {
	p, base, _ := startTestAPI(t)
	marker := t.TempDir() + "/ran"
	cases := []struct {
		name, user string
		want       string
	}{
		{"no certificate", "", "Unauthorized"},
		{"another user", "mallory", "Forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := clientremotecommand.NewSPDYExecutor(p.restConfig(base, tc.user), http.MethodPost, execURL(t, base, false, false, "touch", marker))
			require.NoError(t, err)
			var out, errOut bytes.Buffer
			err = ex.StreamWithContext(context.Background(), clientremotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NoFileExists(t, marker, "the command must not run")
		})
	}

	// Plain requests: /healthz is open, the rest is not.
	anon := p.httpClient("")
	for path, want := range map[string]int{"/healthz": 200, "/containerLogs/default/web/c": 401, "/stats/summary": 401, "/exec/default/web/c?command=true&output=1": 401} {
		resp, err := anon.Get(base + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
}

// TestAPIExec: exit codes, stdout and stderr apart, stdin, and a terminal, as kubectl
// exec (client-go's SPDY executor) sees them.
func TestAPIExec(t *testing.T) {
	p, base, _ := startTestAPI(t)
	cfg := p.restConfig(base, "apiserver")
	cases := []struct {
		name           string
		cmd            []string
		stdin          string
		tty            bool
		wantOut        string
		wantErr        string
		wantExit       int
		wantErrContain string
	}{
		{name: "exit 0", cmd: []string{"sh", "-c", "echo out; echo err >&2"}, wantOut: "out\n", wantErr: "err\n"},
		{name: "exit 3", cmd: []string{"sh", "-c", "echo before; exit 3"}, wantOut: "before\n", wantExit: 3},
		{name: "killed", cmd: []string{"sh", "-c", "kill -9 $$"}, wantExit: 137},
		{name: "stdin", cmd: []string{"sh", "-c", "tr a-z A-Z"}, stdin: "hello\n", wantOut: "HELLO\n"},
		{name: "not found", cmd: []string{"/no/such/program"}, wantErrContain: "no such file"},
		{name: "tty", cmd: []string{"sh", "-c", "test -t 0 && test -t 1 && echo terminal"}, tty: true, wantOut: "terminal\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := clientremotecommand.NewSPDYExecutor(cfg, http.MethodPost, execURL(t, base, tc.tty, tc.stdin != "", tc.cmd...))
			require.NoError(t, err)
			var out, errOut bytes.Buffer
			opts := clientremotecommand.StreamOptions{Stdout: &out, Tty: tc.tty}
			if !tc.tty {
				opts.Stderr = &errOut
			}
			if tc.stdin != "" {
				opts.Stdin = strings.NewReader(tc.stdin)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = ex.StreamWithContext(ctx, opts)
			switch {
			case tc.wantErrContain != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErrContain)
				return
			case tc.wantExit != 0:
				var ce clientexec.CodeExitError
				require.True(t, errors.As(err, &ce), "want exit status %d, got %v", tc.wantExit, err)
				assert.Equal(t, tc.wantExit, ce.Code)
			default:
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantOut, out.String())
			assert.Equal(t, tc.wantErr, errOut.String())
		})
	}
}

// TestAPINotFound: unknown pods, containers and paths are 404, as on a kubelet.
func TestAPINotFound(t *testing.T) {
	p, base, _ := startTestAPI(t)
	client := p.httpClient("apiserver")
	for _, path := range []string{
		"/containerLogs/default/nope/c", "/containerLogs/default/web/nope", "/stats/summary", "/metrics", "/pods", "/run/default/web/c",
		"/exec/default/nope/c?command=true&output=1", "/exec/default/web/uid-2/c?command=true&output=1",
	} {
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		// Paths under /stats and /metrics map to subresources the test authorizer refuses.
		want := http.StatusNotFound
		if strings.HasPrefix(path, "/stats") || strings.HasPrefix(path, "/metrics") {
			want = http.StatusForbidden
		}
		assert.Equal(t, want, resp.StatusCode, path)
	}
}

// TestAPIContainerLogs: /containerLogs serves the log store's lines with the options the
// API server forwards.
func TestAPIContainerLogs(t *testing.T) {
	p, base, host := startTestAPI(t)
	ref := PodRef{Namespace: "default", Name: "web", UID: "uid-1"}
	w, err := host.logs.Writer(ref, "c", 0, StreamStdout)
	require.NoError(t, err)
	_, err = io.WriteString(w, "one\ntwo\nthree\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())

	client := p.httpClient("apiserver")
	cases := []struct {
		query, want string
		status      int
	}{
		{"", "one\ntwo\nthree\n", 200},
		{"?tailLines=2", "two\nthree\n", 200},
		{"?limitBytes=5", "one\nt", 200},
		{"?previous=true", "previous terminated container \"c\" in pod \"web\" not found\n", 400},
		{"?tailLines=x", "tailLines=\"x\": want a number >= 0\n", 400},
	}
	for _, tc := range cases {
		resp, err := client.Get(base + "/containerLogs/default/web/c" + tc.query)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, tc.status, resp.StatusCode, tc.query)
		assert.Equal(t, tc.want, string(body), tc.query)
	}
}

// TestAPIPortForward: kubectl port-forward's client (client-go over SPDY) reaches the
// pod's port through the kubelet API, and the pod's answer comes back.
func TestAPIPortForward(t *testing.T) {
	p, base, _ := startTestAPI(t)
	// The "pod's" port: a loopback listener that answers each line with "pong <line>".
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = io.WriteString(c, "pong "+line)
			}()
		}
	}()
	podPort := l.Addr().(*net.TCPAddr).Port

	cfg := p.restConfig(base, "apiserver")
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	require.NoError(t, err)
	u, err := url.Parse(base + "/portForward/default/web")
	require.NoError(t, err)
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", podPort)}, stop, ready, io.Discard, io.Discard)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward: %v", err)
	}
	ports, err := fw.GetPorts()
	require.NoError(t, err)
	require.Len(t, ports, 1)
	for i := range 2 { // two connections over one forward
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		require.NoError(t, err)
		_, err = fmt.Fprintf(c, "ping %d\n", i)
		require.NoError(t, err)
		answer, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("pong ping %d\n", i), answer)
		_ = c.Close()
	}
}
