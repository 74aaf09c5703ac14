//go:build linux

package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// probeKind is the purpose of a container probe.
type probeKind string

// The kinds of container probes.
const (
	startupProbe   probeKind = "startup"
	readinessProbe probeKind = "readiness"
	livenessProbe  probeKind = "liveness"
)

// probeResult is a probe's verdict after its thresholds: sent to the pod worker only when
// it changes.
type probeResult struct {
	container int // index in the worker's containers
	instance  int // the container instance the probe ran against
	kind      probeKind
	ok        bool
}

// supportedProbe reports whether the lab kubelet runs p: httpGet, tcpSocket and exec
// (grpc is not).
func supportedProbe(p *corev1.Probe) bool {
	return p != nil && (p.HTTPGet != nil || p.TCPSocket != nil || p.Exec != nil)
}

// prober runs probes from inside the node's namespace, as a kubelet probes from its host,
// and exec probes inside the pod's namespaces.
type prober struct {
	dialer *probe.Prober
	http   *http.Client
	https  *http.Client
	// launcher runs exec probes.
	launcher *launcher
}

func newProber(d *probe.Prober) *prober {
	mk := func(tlsCfg *tls.Config) *http.Client {
		return &http.Client{Transport: &http.Transport{
			DialContext: d.DialContext, DisableKeepAlives: true, TLSClientConfig: tlsCfg,
		}}
	}
	// A kubelet does not verify the certificate of an HTTPS probe.
	return &prober{dialer: d, http: mk(nil), https: mk(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})} //nolint:gosec // as a kubelet
}

// resolvePort returns the number of a probe's port: a number, or the name of one of the
// container's ports.
func resolvePort(port intstr.IntOrString, c corev1.Container) (uint16, error) {
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return 0, fmt.Errorf("port %d is not in 1-65535", port.IntVal)
		}
		return uint16(port.IntVal), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return uint16(p.ContainerPort), nil
		}
	}
	if n, err := strconv.ParseUint(port.StrVal, 10, 16); err == nil && n > 0 {
		return uint16(n), nil
	}
	return 0, fmt.Errorf("port %q is not a port name of container %s", port.StrVal, c.Name)
}

// once runs a probe one time against a container at podIP (an exec probe: as spec, the
// container's namespaces and environment) and reports success, or why it failed.
func (pr *prober) once(ctx context.Context, p *corev1.Probe, c corev1.Container, podIP netip.Addr, spec procSpec) (bool, string) {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := func(h string) (netip.Addr, error) {
		if h == "" {
			return podIP, nil
		}
		return netip.ParseAddr(h) // no DNS in the lab
	}
	switch {
	case p.HTTPGet != nil:
		g := p.HTTPGet
		port, err := resolvePort(g.Port, c)
		if err != nil {
			return false, err.Error()
		}
		ip, err := host(g.Host)
		if err != nil {
			return false, fmt.Sprintf("host %q: %v", g.Host, err)
		}
		scheme, client := "http", pr.http
		if g.Scheme == corev1.URISchemeHTTPS {
			scheme, client = "https", pr.https
		}
		path := g.Path
		if path == "" || path[0] != '/' {
			path = "/" + path
		}
		url := fmt.Sprintf("%s://%s%s", scheme, netip.AddrPortFrom(ip, port), path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		req.Header.Set("User-Agent", "kube-probe/1.37")
		for _, h := range g.HTTPHeaders {
			if h.Name == "Host" {
				req.Host = h.Value
				continue
			}
			req.Header.Add(h.Name, h.Value)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, fmt.Sprintf("Get %q: %v", url, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return true, ""
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return false, err.Error()
		}
		ip, err := host(p.TCPSocket.Host)
		if err != nil {
			return false, fmt.Sprintf("host %q: %v", p.TCPSocket.Host, err)
		}
		res := pr.dialer.Connect(ctx, probe.Destination{Addr: netip.AddrPortFrom(ip, port), Protocol: echo.TCP}, probe.Options{Timeout: timeout})
		if res.Err != nil {
			return false, fmt.Sprintf("dial tcp %s: %v", netip.AddrPortFrom(ip, port), res.Err)
		}
		return true, ""
	case p.Exec != nil:
		if len(p.Exec.Command) == 0 {
			return false, "exec probe without a command"
		}
		spec.argv = p.Exec.Command
		code, out, err := pr.launcher.run(ctx, spec)
		if err != nil {
			return false, fmt.Sprintf("exec %q: %v", strings.Join(spec.argv, " "), err)
		}
		if code != 0 {
			return false, fmt.Sprintf("command %q exited with %d: %s", strings.Join(spec.argv, " "), code, strings.TrimSpace(string(out)))
		}
		return true, ""
	}
	return false, "probe kind not supported by the lab kubelet"
}

// runProbe probes one container instance until ctx ends, with the probe's initial delay,
// period and thresholds, and sends each change of verdict to results (the first verdict
// too). A startup probe stops after its success; startup and liveness probes stop after a
// failing verdict (the worker restarts the container and its probes).
func (w *podWorker) runProbe(ctx context.Context, idx, instance int, kind probeKind, p *corev1.Probe, c corev1.Container, podIP netip.Addr, spec procSpec) {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	succTh, failTh := max(int(p.SuccessThreshold), 1), max(int(p.FailureThreshold), 1)
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(max(p.InitialDelaySeconds, 0)) * time.Second):
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	var succ, fail int
	var last *bool
	for {
		ok, msg := w.k.prober.once(ctx, p, c, podIP, spec)
		if ctx.Err() != nil {
			return
		}
		if ok {
			succ, fail = succ+1, 0
		} else {
			succ, fail = 0, fail+1
			w.k.eventf(w.pod(), corev1.EventTypeWarning, "Unhealthy", "%s probe of container %s failed: %s", kind, c.Name, msg)
		}
		var verdict *bool
		switch {
		case succ >= succTh:
			verdict = &ok
		case fail >= failTh:
			verdict = &ok
		}
		if verdict != nil && (last == nil || *last != *verdict) {
			last = verdict
			select {
			case w.results <- probeResult{container: idx, instance: instance, kind: kind, ok: *verdict}:
			case <-ctx.Done():
				return
			}
			if (kind == startupProbe && *verdict) || (kind != readinessProbe && !*verdict) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
