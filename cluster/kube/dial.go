package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
)

// netexecTryTimeout is agnhost netexec's own timeout of one /dial try.
const netexecTryTimeout = 5 * time.Second

// dialRequester sends probes from a prober pod: one GET of netexec's
// /dial?request=hostname through the API server's pods/proxy subresource per probe.
type dialRequester struct {
	c    *Cluster
	pod  string
	port int32
}

// dialAnswer is netexec's /dial answer.
type dialAnswer struct {
	Responses []string `json:"responses"`
	Errors    []string `json:"errors"`
}

// Request sends one probe to target from the prober pod. The answer names the pod that
// answered (agnhost's /hostname is the pod's name); the client address is not read.
func (r *dialRequester) Request(ctx context.Context, target probe.Destination, opts probe.Options) probe.Result {
	start := time.Now()
	a, err := r.dial(ctx, target, opts, 1)
	res := probe.Result{Total: time.Since(start)}
	if err != nil {
		res.Err, res.Class = err, probe.Other
		return res
	}
	if len(a.Responses) > 0 && len(a.Errors) == 0 {
		res.Answer = echo.Answer{Pod: strings.TrimSpace(a.Responses[0]), Protocol: target.Protocol}
		return res
	}
	msg := "no answer"
	if len(a.Errors) > 0 {
		msg = a.Errors[0]
	}
	res.Err, res.Class = errors.New(msg), classify(msg)
	return res
}

// dial GETs netexec's /dial with tries tries to target, through the API server.
func (r *dialRequester) dial(ctx context.Context, target probe.Destination, opts probe.Options, tries int) (dialAnswer, error) {
	if err := r.c.allowed(target.Addr.Addr()); err != nil {
		return dialAnswer{}, err
	}
	return r.dialUnchecked(ctx, target, opts, tries, "hostname")
}

// dialUnchecked is dial with any request path and no check of the target (callers send
// only to the prober's own node).
func (r *dialRequester) dialUnchecked(ctx context.Context, target probe.Destination, opts probe.Options, tries int, request string) (dialAnswer, error) {
	var a dialAnswer
	protocol := "http"
	if target.Protocol == echo.UDP {
		protocol = "udp"
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(tries)*max(opts.Timeout, netexecTryTimeout)+10*time.Second)
	defer cancel()
	body, err := r.c.client.CoreV1().RESTClient().Get().
		Namespace(r.c.namespace).Resource("pods").Name(r.pod+":"+strconv.Itoa(int(r.port))).
		SubResource("proxy").Suffix("dial").
		Param("request", request).Param("host", target.Addr.Addr().String()).
		Param("port", strconv.Itoa(int(target.Addr.Port()))).Param("protocol", protocol).Param("tries", strconv.Itoa(tries)).
		DoRaw(ctx)
	if err != nil {
		return a, fmt.Errorf("prober %s: %w", r.pod, err)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("prober %s: /dial answered %q: %w", r.pod, body, err)
	}
	return a, nil
}

// classify sorts netexec's /dial error text into a probe class.
func classify(msg string) probe.ErrClass {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "connection refused"):
		return probe.Refused
	case strings.Contains(m, "no route to host"), strings.Contains(m, "network is unreachable"), strings.Contains(m, "host is down"):
		return probe.Unreachable
	case strings.Contains(m, "connection reset"), strings.Contains(m, "broken pipe"):
		return probe.Reset
	case strings.Contains(m, "timeout"), strings.Contains(m, "deadline exceeded"), strings.Contains(m, "i/o timeout"):
		return probe.Timeout
	}
	return probe.Other
}

// allowed refuses probes to addresses outside the cluster: a probe goes to a Service's
// ClusterIP, a node's IP or a pod's IP of the run, nowhere else.
func (c *Cluster) allowed(ip netip.Addr) error {
	for _, n := range c.nodes {
		if n.IP == ip {
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.services {
		for _, c := range s.Spec.ClusterIPs {
			if c == ip.String() {
				return nil
			}
		}
	}
	for _, p := range c.pods {
		if p.Status.PodIP == ip.String() {
			return nil
		}
	}
	return fmt.Errorf("refused to probe %s: not a node, pod or Service address of the run", ip)
}

func destinationOf(ap netip.AddrPort, p corev1.Protocol) probe.Destination {
	return probe.Destination{Addr: ap, Protocol: lab.Protocol(p)}
}

func probeOptions() probe.Options { return probe.Options{Timeout: 2 * time.Second} }

func intstrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }

// kubeProxyMetricsPort is kube-proxy's metrics port, where /proxyMode answers.
const kubeProxyMetricsPort = 10249

// ProxyMode asks kube-proxy on the first node for its mode (GET /proxyMode on :10249,
// from the node's hostNetwork prober: the node's IP, then 127.0.0.1, kube-proxy's
// default bind address). It returns "" and the reason when no kube-proxy answers (another
// proxy, or metrics bound elsewhere). Call it after WaitSynced.
func (c *Cluster) ProxyMode(ctx context.Context) (string, string) {
	n := c.nodes[0]
	r := &dialRequester{c: c, pod: hostProberName(n.Name), port: hostProberPort(c.opts.RunID)}
	var reasons []string
	for _, ip := range []netip.Addr{n.IP, netip.AddrFrom4([4]byte{127, 0, 0, 1})} {
		target := probe.Destination{Addr: netip.AddrPortFrom(ip, kubeProxyMetricsPort), Protocol: echo.TCP}
		a, err := r.dialUnchecked(ctx, target, probe.Options{Timeout: time.Second}, 1, "proxyMode")
		switch {
		case err != nil:
			reasons = append(reasons, err.Error())
		case len(a.Responses) > 0 && len(a.Errors) == 0:
			mode := strings.TrimSpace(a.Responses[0])
			if mode != "" && !strings.ContainsAny(mode, " <\n") {
				return mode, ""
			}
			reasons = append(reasons, fmt.Sprintf("%s answered %q", target.Addr, mode))
		case len(a.Errors) > 0:
			reasons = append(reasons, fmt.Sprintf("%s: %s", target.Addr, a.Errors[0]))
		}
	}
	return "", "no kube-proxy /proxyMode on " + n.Name + ": " + strings.Join(reasons, "; ")
}
