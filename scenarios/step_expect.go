//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/manifest"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/reports/stats"
	"kpbench.dev/kpbench/scenarios/check"
)

// Expectation kinds.
const (
	// ExpectReachable: every probe gets an answer.
	ExpectReachable = "reachable"
	// ExpectRefused: every probe is actively refused (TCP RST / ICMP unreachable).
	ExpectRefused = "refused"
	// ExpectDropped: every probe times out.
	ExpectDropped = "dropped"
	// ExpectAllEndpoints: every ready endpoint answers at least once.
	ExpectAllEndpoints = "allEndpoints"
	// ExpectSameBackend: every probe is answered by the same endpoint (affinity).
	ExpectSameBackend = "sameBackend"
	// ExpectDistribution: answers spread over the endpoints as expected (chi-square).
	ExpectDistribution = "distribution"
	// ExpectSourceIPPreserved: the endpoint sees the client's own address.
	ExpectSourceIPPreserved = "sourceIPPreserved"
	// ExpectHTTPStatus: every probe is an HTTP GET of Path answered with Status (e.g. a
	// health-check node port: 200 on a node with local endpoints, 503 without).
	ExpectHTTPStatus = "httpStatus"
)

// ExpectStep sends probes from one host to a destination and checks the outcome.
type ExpectStep struct {
	// From is the sending host: "client-N", "node-N", or "pod:NAME" /
	// "pod:NAMESPACE/NAME" (Deployment pods are named <deployment>-<ordinal>).
	From string `json:"from"`
	// To is where the probes go.
	To Destination `json:"to"`
	// Protocol of the probes, TCP, UDP or SCTP (default: the destination service port's
	// protocol, or TCP for a literal address).
	Protocol string `json:"protocol,omitempty"`
	// Count is the number of probes, 1-100000 (default 1 for reachable, refused, dropped
	// and sourceIPPreserved; 100 for allEndpoints, sameBackend and distribution). A
	// distribution sends at least check.DistributionProbes for its endpoints (476 for 3),
	// so that a skewed selection cannot pass.
	Count int `json:"count,omitempty"`
	// Expectation is what must be observed: reachable, refused, dropped, allEndpoints,
	// sameBackend, distribution, sourceIPPreserved or httpStatus.
	Expectation string `json:"expectation"`
	// Status is the HTTP status every answer must have (httpStatus only, and required
	// there: 100-599).
	Status int `json:"status,omitempty"`
	// Path is the path of the httpStatus GET (default "/"; httpStatus only).
	Path string `json:"path,omitempty"`
	// Timeout bounds the whole step (default 30s).
	Timeout *Duration `json:"timeout,omitempty"`
	// SourcePort, when not 0, is the fixed local port every probe is sent from (UDP
	// conntrack cases: the same 5-tuple across an endpoint change). 0: an ephemeral port
	// per probe. With TCP, consecutive probes from one port may collide with TIME_WAIT.
	SourcePort int `json:"sourcePort,omitempty"`
	// Interval is a pause between consecutive probes (default none), at most
	// MaxProbeInterval; e.g. longer than a session affinity timeout, so that every probe
	// chooses its endpoint afresh.
	Interval *Duration `json:"interval,omitempty"`
}

// Address kinds of a Service destination.
const (
	AddressClusterIP    = "clusterIP"
	AddressNodePort     = "nodePort"
	AddressLoadBalancer = "loadBalancer"
	AddressExternalIP   = "externalIP"
	// AddressHealthCheckNodePort is a node's address with the Service's health-check node
	// port (LoadBalancer Services with externalTrafficPolicy Local): kube-proxy's service
	// health server, probed with httpStatus.
	AddressHealthCheckNodePort = "healthCheckNodePort"
)

// Destination is where probes go (the step's `to:`): a Service port reached through one
// of its addresses, or a literal IP:port. Exactly one of Service and IPPort is set.
type Destination struct {
	// Service is "namespace/name" or "name" (namespace "default") of a Service the
	// scenario defines.
	Service string `json:"service,omitempty"`
	// Port is the service port's name; required when the Service has more than one port.
	Port string `json:"port,omitempty"`
	// Address is how the Service is reached: clusterIP (default), nodePort,
	// loadBalancer, externalIP or healthCheckNodePort.
	Address string `json:"address,omitempty"`
	// Node is the node whose address is used for nodePort and healthCheckNodePort
	// (default node-0).
	Node string `json:"node,omitempty"`
	// IPPort is a literal "IP:port" destination.
	IPPort string `json:"ipPort,omitempty"`
}

// Default sets the count (1, or 100 for the expectations that judge a spread), the
// step's timeout, and a Service destination's address (clusterIP) and node (node-0 for a
// nodePort).
func (e *ExpectStep) Default() {
	if e.Timeout == nil {
		e.Timeout = NewDuration(DefaultExpectTimeout)
	}
	if e.Count == 0 {
		switch e.Expectation {
		case ExpectAllEndpoints, ExpectSameBackend, ExpectDistribution:
			e.Count = 100
		default:
			e.Count = 1
		}
	}
	if e.To.Service != "" {
		setDefault(&e.To.Address, AddressClusterIP)
		if e.To.Address == AddressNodePort {
			setDefault(&e.To.Node, "node-0")
		}
	}
}

func validExpectation(e string) bool {
	switch e {
	case ExpectReachable, ExpectRefused, ExpectDropped, ExpectAllEndpoints, ExpectSameBackend, ExpectDistribution, ExpectSourceIPPreserved, ExpectHTTPStatus:
		return true
	}
	return false
}

// Validate checks the probe source, the destination and the expectation against the objects
// that exist at this step.
func (e *ExpectStep) Validate(v *Validation, p *field.Path) field.ErrorList {
	errs := v.CheckHost(e.From, p.Child("from"))
	if e.From == "" {
		errs = field.ErrorList{field.Required(p.Child("from"), "client-N, node-N or pod:NAME")}
	}
	if !validExpectation(e.Expectation) {
		errs = append(errs, field.NotSupported(p.Child("expectation"), e.Expectation, []string{
			ExpectReachable, ExpectRefused, ExpectDropped, ExpectAllEndpoints, ExpectSameBackend, ExpectDistribution, ExpectSourceIPPreserved, ExpectHTTPStatus}))
	}
	if e.Expectation == ExpectHTTPStatus {
		if e.Status < 100 || e.Status > 599 {
			errs = append(errs, field.Invalid(p.Child("status"), e.Status, "must be an HTTP status, 100-599"))
		}
		if e.Path != "" && !strings.HasPrefix(e.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), e.Path, "must start with /"))
		}
		if e.Protocol != "" && e.Protocol != "TCP" {
			errs = append(errs, field.Invalid(p.Child("protocol"), e.Protocol, "HTTP goes over TCP"))
		}
	} else {
		if e.Status != 0 {
			errs = append(errs, field.Forbidden(p.Child("status"), "only an httpStatus expectation has a status"))
		}
		if e.Path != "" {
			errs = append(errs, field.Forbidden(p.Child("path"), "only an httpStatus expectation has a path"))
		}
	}
	if e.Count < 1 || e.Count > MaxProbeCount {
		errs = append(errs, field.Invalid(p.Child("count"), e.Count, fmt.Sprintf("must be in range 1-%d", MaxProbeCount)))
	}
	errs = append(errs, validateDuration(e.Timeout, p.Child("timeout"))...)
	if e.SourcePort < 0 || e.SourcePort > 65535 {
		errs = append(errs, field.Invalid(p.Child("sourcePort"), e.SourcePort, "must be in range 1-65535 (0: an ephemeral port per probe)"))
	}
	errs = append(errs, validateDuration(e.Interval, p.Child("interval"))...)
	if e.Interval != nil && e.Interval.Duration > MaxProbeInterval {
		errs = append(errs, field.Invalid(p.Child("interval"), e.Interval.String(), fmt.Sprintf("must be at most %s", MaxProbeInterval)))
	}
	if e.Protocol != "" {
		errs = append(errs, validateProtocol(e.Protocol, p.Child("protocol"))...)
	}
	tp := p.Child("to")
	to := e.To
	switch {
	case to.Service != "" && to.IPPort != "":
		return append(errs, field.Forbidden(tp, "set either service or ipPort, not both"))
	case to.Service == "" && to.IPPort == "":
		return append(errs, field.Required(tp, "service (namespace/name) or ipPort"))
	case to.IPPort != "":
		ap, err := netip.ParseAddrPort(to.IPPort)
		if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
			errs = append(errs, field.Invalid(tp.Child("ipPort"), to.IPPort, "must be IPv4:port, e.g. 10.96.0.10:53"))
		}
		if to.Port != "" || to.Address != "" || to.Node != "" {
			errs = append(errs, field.Forbidden(tp, "port, address and node apply only to a service target"))
		}
		return errs
	}
	ns, name := splitName(to.Service)
	o, ok := v.Object(manifest.Key{Kind: manifest.KindService, Namespace: ns, Name: name})
	if !ok {
		return append(errs, field.NotFound(tp.Child("service"), fmt.Sprintf("%s: no Service %s/%s exists at this step", to.Service, ns, name)))
	}
	svc := o.Object.(*corev1.Service)
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return append(errs, field.Invalid(tp.Child("service"), to.Service, "headless and ExternalName Services have no proxy rules to probe"))
	}
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == to.Port {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		var names []string
		for _, sp := range svc.Spec.Ports {
			names = append(names, sp.Name)
		}
		if to.Port == "" {
			errs = append(errs, field.Required(tp.Child("port"), fmt.Sprintf("the Service has several ports: one of %s", strings.Join(names, ", "))))
		} else {
			errs = append(errs, field.NotSupported(tp.Child("port"), to.Port, names))
		}
	} else if e.Protocol != "" && string(port.Protocol) != e.Protocol {
		errs = append(errs, field.Invalid(p.Child("protocol"), e.Protocol, fmt.Sprintf("the service port is %s", port.Protocol)))
	}
	switch to.Address {
	case AddressClusterIP:
	case AddressNodePort:
		if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s is of type %s and has no node port", ns, name, svc.Spec.Type)))
		}
		if m := hostRE.FindStringSubmatch(to.Node); m == nil || m[1] != "node" {
			errs = append(errs, field.Invalid(tp.Child("node"), to.Node, "must be node-N"))
		} else {
			errs = append(errs, v.CheckHost(to.Node, tp.Child("node"))...)
		}
	case AddressLoadBalancer:
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s is of type %s, not LoadBalancer", ns, name, svc.Spec.Type)))
		}
	case AddressExternalIP:
		if len(svc.Spec.ExternalIPs) == 0 {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s has no externalIPs", ns, name)))
		}
	case AddressHealthCheckNodePort:
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			errs = append(errs, field.Invalid(tp.Child("address"), to.Address, fmt.Sprintf("Service %s/%s has no health-check node port: only LoadBalancer Services with externalTrafficPolicy Local have one", ns, name)))
		}
		if to.Node != "" {
			if m := hostRE.FindStringSubmatch(to.Node); m == nil || m[1] != "node" {
				errs = append(errs, field.Invalid(tp.Child("node"), to.Node, "must be node-N"))
			} else {
				errs = append(errs, v.CheckHost(to.Node, tp.Child("node"))...)
			}
		}
	default:
		errs = append(errs, field.NotSupported(tp.Child("address"), to.Address, []string{AddressClusterIP, AddressNodePort, AddressLoadBalancer, AddressExternalIP, AddressHealthCheckNodePort}))
	}
	if e.Expectation == ExpectHTTPStatus && to.Address != AddressHealthCheckNodePort {
		errs = append(errs, field.Invalid(tp.Child("address"), to.Address, "httpStatus probes a Service's healthCheckNodePort (or a literal ipPort)"))
	}
	if to.Node != "" && to.Address != AddressNodePort && to.Address != AddressHealthCheckNodePort {
		errs = append(errs, field.Forbidden(tp.Child("node"), "only a nodePort or healthCheckNodePort target names a node"))
	}
	return errs
}

// Run probes and judges; it records the step's case either way.
func (e *ExpectStep) Run(ctx context.Context, s *Session) error {
	start := time.Now()
	timeout := DefaultExpectTimeout
	if e.Timeout != nil {
		timeout = e.Timeout.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	evidence, err := e.probe(ctx, s)
	c := reports.Case{Result: reports.CasePass, Evidence: evidence, Duration: time.Since(start)}
	if err != nil {
		c.Result, c.Reason = reports.CaseFail, err.Error()
	}
	s.RecordCase(c)
	return err
}

// probe sends the probes and judges them, returning the evidence.
func (e *ExpectStep) probe(ctx context.Context, s *Session) (string, error) {
	if e.Expectation == ExpectHTTPStatus {
		return e.probeHTTP(ctx, s) // expect_http.go
	}
	from, note, err := resolveSender(s.Cluster, e.From, e.To.Node)
	if err != nil {
		return "", err
	}
	addr, sp, err := resolveDestination(s.Cluster, e.To)
	if err != nil {
		if e.To.Address == AddressLoadBalancer && sp != nil && len(sp.LoadBalancerIPs) == 0 {
			// The lab assigns every LoadBalancer Service an address; a real cluster
			// without a load-balancer controller leaves it pending: not a failure of the
			// proxy, and nothing to send to (not checked, which no gate takes for a pass).
			return "", fmt.Errorf("%w: %v (no load-balancer controller assigned one)", cluster.ErrNotAvailable, err)
		}
		return "", err
	}
	if e.To.Address == AddressLoadBalancer || e.To.Address == AddressExternalIP {
		if err := s.Cluster.AddClientRoute(ctx, netip.PrefixFrom(addr.Addr(), 32)); err != nil {
			return "", err
		}
	}
	proto := lab.Protocol(strings.ToUpper(e.Protocol))
	if proto == "" {
		proto = lab.TCP
		if sp != nil {
			proto = lab.Protocol(sp.Protocol())
		}
	}
	pr, err := s.Cluster.Prober(from.Name)
	if err != nil {
		return "", err
	}
	probeTimeout := 2 * time.Second
	if e.Expectation == ExpectDropped {
		probeTimeout = time.Second
	}
	var interval time.Duration
	if e.Interval != nil {
		interval = e.Interval.Duration
	}
	target := probe.Destination{Addr: addr, Protocol: proto}
	count := e.Count
	if e.Expectation == ExpectDistribution && sp != nil {
		// Enough probes that the shares' test catches a skewed selection.
		count = check.DistributionProbes(len(readyPods(s.Cluster, sp)), count)
	}
	tally := check.ProbeN(ctx, pr, target, count, probe.Options{Timeout: probeTimeout, SourcePort: uint16(e.SourcePort)}, interval)
	evidence := fmt.Sprintf("%s → %s/%s: %d probes: %s; answers %v%s", from.Name, addr, proto, tally.N, tally.ClassSummary(), tally.Pods, note)
	if tally.N < count {
		return evidence, fmt.Errorf("only %d of %d probes sent before the step's timeout", tally.N, count)
	}
	return evidence, unmet(e.judge(s.Cluster, from, sp, tally)) // the probes ran: a failure is the verdict
}

// judge says whether the tally is what the expectation wants.
func (e *ExpectStep) judge(c cluster.Cluster, from lab.Host, sp *backends.ServicePort, t check.Tally) error {
	all := func(class probe.ErrClass, what string) error {
		if t.Classes[class] != t.N {
			return fmt.Errorf("expected every probe %s, got %s (first error: %v)", what, t.ClassSummary(), t.FirstErr)
		}
		return nil
	}
	switch e.Expectation {
	case ExpectRefused:
		return all(probe.Refused, "refused within 3s")
	case ExpectDropped:
		return all(probe.Timeout, "dropped (timed out)")
	}
	if err := all(probe.OK, "answered"); err != nil {
		return err
	}
	switch e.Expectation {
	case ExpectSameBackend:
		if len(t.Pods) != 1 {
			return fmt.Errorf("expected one backend for every probe, got %d: %v", len(t.Pods), t.Pods)
		}
	case ExpectSourceIPPreserved:
		if len(t.Clients) != 1 || t.Clients[from.IP] != t.N {
			return fmt.Errorf("expected the endpoint to see %s, it saw %v", from.IP, t.Clients)
		}
	case ExpectAllEndpoints, ExpectDistribution:
		if sp == nil {
			return fmt.Errorf("%s needs a service target", e.Expectation)
		}
		expected := readyPods(c, sp)
		var missing []string
		counts := make([]int, 0, len(expected))
		for _, pod := range expected {
			if t.Pods[pod] == 0 {
				missing = append(missing, pod)
			}
			counts = append(counts, t.Pods[pod])
		}
		if e.Expectation == ExpectAllEndpoints && len(missing) > 0 {
			return fmt.Errorf("endpoints never reached: %s (answers %v)", strings.Join(missing, ", "), t.Pods)
		}
		if e.Expectation == ExpectDistribution && len(counts) > 1 {
			chi2, df, p, err := stats.ChiSquareGOF(counts, stats.Uniform(len(counts)))
			if err != nil {
				return err
			}
			if p < check.MinPValue {
				return fmt.Errorf("selection does not fit uniform shares: chi2=%.2f df=%d p=%.3g (counts %v)", chi2, df, p, t.Pods)
			}
		}
	}
	return nil
}
