//go:build linux

// Package check verifies, with real traffic, every path a Service's type implies: its
// ClusterIP from a pod on each node, its NodePort from an external client on every node,
// its load-balancer and external IPs from the client. Each path must reach the endpoints
// kube-proxy would choose (all of them, with shares a chi-square test accepts), keep
// session affinity when it is set, refuse when there are no endpoints, and drop when a
// Local traffic policy leaves a node without local endpoints.
package check

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports/stats"
)

// Verdict of one path.
type Verdict string

// The verdicts.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
	// Info marks Services that get no proxy rules (headless, ExternalName): nothing to
	// check, and that is expected.
	Info Verdict = "info"
	// NotChecked marks a path the target cannot send on (no host outside the cluster on a
	// real cluster, say), with the reason: never a pass.
	NotChecked Verdict = "not checked"
	// Skip marks a path that could not be checked here (e.g. SCTP: the lab's echo servers
	// speak TCP and UDP only). It is not a pass: `kpbench check` fails on it unless
	// --allow-skip.
	Skip Verdict = "skip"
)

// MinPValue is the chi-square p-value below which a selection is judged not to follow the
// expected shares.
const MinPValue = 0.001

// Outcome is the result of checking one path.
type Outcome struct {
	// Service is "namespace/name", Port the service port's name and number.
	Service, Port string
	// Path says which way traffic went: "clusterIP", "nodePort", "loadBalancer", "externalIP".
	Path string
	// From is the host that sent; Destination the address it sent to (JSON key
	// "Target", as `kpbench check --json` has always written it); Protocol TCP/UDP.
	From        string
	Destination string `json:"Target"`
	Protocol    string
	// Verdict and Detail (the evidence: counts, endpoints seen, p-value, errors).
	Verdict Verdict
	Detail  string
	// Counts are answers per pod.
	Counts map[string]int `json:",omitempty"`
	// PValue of the chi-square test (0 when not computed).
	PValue float64 `json:",omitempty"`
}

// Options tune the checks.
type Options struct {
	// PerEndpoint is how many requests per expected endpoint a path sends (default 20, the
	// minimum for a meaningful chi-square test); at least MinRequests (default 30), and,
	// where the shares are judged, at least DistributionProbes.
	PerEndpoint, MinRequests int
	// Timeout of one probe (default 2s; drops are expected to time out).
	Timeout time.Duration
	// ReachabilityOnly: the answers do not name their pod (the user's own containers
	// answered), so only that every probe was answered is checked, not which endpoints
	// answered nor their shares.
	ReachabilityOnly bool
}

func (o *Options) defaults() {
	o.PerEndpoint = cmp.Or(o.PerEndpoint, 20)
	o.MinRequests = cmp.Or(o.MinRequests, 30)
	o.Timeout = cmp.Or(o.Timeout, 2*time.Second)
}

// Cluster is what Run checks: its Services and EndpointSlices, its nodes and pods, and
// the hosts that send each path's traffic. It is the part of a cluster under test
// (cluster.Cluster, with the same methods) that the check drives: the lab's testbed and
// a real cluster reached through a kubeconfig (cluster/kube) are ones.
type Cluster interface {
	// WaitSynced waits until the proxies programmed every change made so far.
	WaitSynced(ctx context.Context) error
	// Services and EndpointSlices are the objects to check.
	Services() []*corev1.Service
	EndpointSlices() []*discoveryv1.EndpointSlice
	// Hosts returns the nodes (KindNode), pods (KindPod) and external clients
	// (KindClient) in name order.
	Hosts(kind lab.HostKind) []lab.Host
	// ProbeHost names the host in node's pod network that sends ClusterIP traffic.
	ProbeHost(node string) string
	// ClientFor returns the host that sends an external client's traffic to node ("":
	// to a load-balancer or external IP), with a note when it is not the client itself.
	ClientFor(client, node string) (host lab.Host, note string, err error)
	// AddClientRoute routes a load-balancer or external IP from the external clients.
	AddClientRoute(ctx context.Context, prefix netip.Prefix) error
	// Prober returns the prober of a host.
	Prober(host string) (cluster.Prober, error)
}

var _ Cluster = cluster.Cluster(nil)

// Run checks every Service of the cluster.
func Run(ctx context.Context, c Cluster, o Options) ([]Outcome, error) {
	o.defaults()
	if err := c.WaitSynced(ctx); err != nil {
		return nil, err
	}
	podByIP := map[netip.Addr]string{}
	for _, p := range c.Hosts(lab.KindPod) {
		podByIP[p.IP] = p.Name
	}
	nodes := c.Hosts(lab.KindNode)
	view := backends.BuildState(backends.NodeView{}, backends.ViewOptions{}, c.Services(), c.EndpointSlices())

	var out []Outcome
	services := c.Services()
	sort.Slice(services, func(i, j int) bool {
		return services[i].Namespace+"/"+services[i].Name < services[j].Namespace+"/"+services[j].Name
	})
	for _, svc := range services {
		name := svc.Namespace + "/" + svc.Name
		if reason := noProxyReason(svc); reason != "" {
			out = append(out, Outcome{Service: name, Path: "-", Verdict: Info, Detail: "no proxy rules (expected): " + reason})
			continue
		}
		for _, sp := range view.Services {
			if sp.Name.Namespace != svc.Namespace || sp.Name.Name != svc.Name {
				continue
			}
			paths, err := pathsOf(ctx, c, sp, nodes)
			if err != nil {
				return out, err
			}
			for _, p := range paths {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				res := checkPath(ctx, c, o, sp, p, podByIP)
				if p.note != "" && p.skip == "" {
					res.Detail += p.note // the host that stood in for the client
				}
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// noProxyReason says why a Service gets no proxy rules ("" when it does).
func noProxyReason(svc *corev1.Service) string {
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return "type ExternalName"
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		return "headless (clusterIP: None)"
	case hasLabel(svc, "service.kubernetes.io/service-proxy-name"):
		return "label service.kubernetes.io/service-proxy-name (another proxy's service)"
	}
	return ""
}

func hasLabel(svc *corev1.Service, key string) bool {
	_, ok := svc.Labels[key]
	return ok
}

// path is one way into a service port, with the endpoints traffic may reach on it.
type path struct {
	kind     string
	from     string
	note     string // where from sends from, when it stands in for a client
	dst      netip.AddrPort
	expected []backends.Endpoint // endpoints that may answer; empty: no answer expected
	reject   bool                // no endpoints at all: connections are refused
	skip     string              // why the path cannot be sent on this cluster
}

// clientFor returns the host that sends the first external client's traffic to node
// ("" for a load-balancer or external IP) and its note, or why none can (skip): a
// cluster without a client outside it may have no host to send from.
func clientFor(c Cluster, node string) (from, note, skip string) {
	client := lab.ClientName(0)
	if clients := c.Hosts(lab.KindClient); len(clients) > 0 {
		client = clients[0].Name
	}
	h, note, err := c.ClientFor(client, node)
	if err != nil {
		return "", "", err.Error()
	}
	return h.Name, note, ""
}

func pathsOf(ctx context.Context, c Cluster, sp *backends.ServicePort, nodes []lab.Host) ([]path, error) {
	var paths []path
	for _, n := range nodes {
		local := localize(sp, n.Name)
		cat := backends.CategorizeEndpoints(local)
		internal := cat.Cluster
		if sp.InternalPolicyLocal {
			internal = cat.Local
		}
		paths = append(paths, path{kind: "clusterIP", from: c.ProbeHost(n.Name),
			dst: netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port)), expected: internal, reject: !cat.HasAnyEndpoints})
	}
	external := func(n lab.Host) []backends.Endpoint {
		cat := backends.CategorizeEndpoints(localize(sp, n.Name))
		if sp.ExternalPolicyLocal {
			return cat.Local
		}
		return cat.Cluster
	}
	hasAny := backends.CategorizeEndpoints(sp).HasAnyEndpoints
	if sp.NodePort != 0 {
		for _, n := range nodes {
			from, note, skip := clientFor(c, n.Name)
			paths = append(paths, path{kind: "nodePort", from: from, note: note, dst: netip.AddrPortFrom(n.IP, uint16(sp.NodePort)),
				expected: external(n), reject: !hasAny, skip: skip})
		}
	}
	ips := func(kind string, list []netip.Addr) error {
		for _, ip := range list {
			// Clients reach load-balancer and external IPs through a route to the cluster.
			from, note, skip := clientFor(c, "")
			if skip == "" {
				err := c.AddClientRoute(ctx, netip.PrefixFrom(ip, 32))
				switch {
				case errors.Is(err, cluster.ErrNotAvailable):
					skip = err.Error()
				case err != nil:
					return err
				}
			}
			paths = append(paths, path{kind: kind, from: from, note: note, dst: netip.AddrPortFrom(ip, uint16(sp.Port)), expected: external(nodes[0]), reject: !hasAny, skip: skip})
		}
		return nil
	}
	if err := ips("loadBalancer", sp.LoadBalancerIPs); err != nil {
		return nil, err
	}
	if err := ips("externalIP", sp.ExternalIPs); err != nil {
		return nil, err
	}
	return paths, nil
}

// localize returns a copy of sp whose endpoints are marked local when they run on node.
func localize(sp *backends.ServicePort, node string) *backends.ServicePort {
	c := *sp
	c.Endpoints = slices.Clone(sp.Endpoints)
	for i := range c.Endpoints {
		c.Endpoints[i].IsLocal = c.Endpoints[i].NodeName == node
	}
	return &c
}

func checkPath(ctx context.Context, c Cluster, o Options, sp *backends.ServicePort, p path, podByIP map[netip.Addr]string) Outcome {
	out := Outcome{
		Service: sp.Name.Namespace + "/" + sp.Name.Name, Port: portLabel(sp), Path: p.kind, From: p.from,
		Destination: p.dst.String(), Protocol: string(sp.Protocol()), Counts: map[string]int{},
	}
	if sp.Protocol() != backends.TCP && sp.Protocol() != backends.UDP {
		out.Verdict, out.Detail = Skip, "not checked: the lab's echo servers speak TCP and UDP only"
		return out
	}
	if p.skip != "" {
		out.Verdict, out.Detail = NotChecked, p.skip
		return out
	}
	pr, err := c.Prober(p.from)
	if err != nil {
		out.Verdict, out.Detail = Fail, err.Error()
		return out
	}
	target := probe.Destination{Addr: p.dst, Protocol: lab.Protocol(sp.Protocol())}
	if len(p.expected) == 0 {
		return checkNoAnswer(ctx, pr, target, o, p, out)
	}
	expected := map[string]bool{}
	for _, ep := range p.expected {
		expected[podByIP[ep.IP]] = true
	}
	warmup := ""
	if !o.ReachabilityOnly && !sp.AffinityClientIP {
		warmup = converge(ctx, pr, target, expected, probe.Options{Timeout: o.Timeout})
	}
	n := max(o.MinRequests, o.PerEndpoint*len(p.expected))
	if !o.ReachabilityOnly && !sp.AffinityClientIP {
		n = DistributionProbes(len(p.expected), n) // shares judged: enough to catch a skew
	}
	tally := ProbeN(ctx, pr, target, n, probe.Options{Timeout: o.Timeout}, 0)
	out.Counts = tally.Pods
	var unexpected []string
	for pod := range tally.Pods {
		if !expected[pod] {
			unexpected = append(unexpected, pod)
		}
	}
	sort.Strings(unexpected)
	ok := tally.OK()
	var problems []string
	if ok < n {
		problems = append(problems, fmt.Sprintf("%d/%d failed (%s), first: %v", n-ok, n, tally.ClassSummary(), tally.FirstErr))
	}
	if o.ReachabilityOnly {
		out.Counts = nil
		out.Verdict, out.Detail = Pass, fmt.Sprintf("%d/%d ok (reachability only: the answers do not name their pod, endpoints and shares not checked)", ok, n)
		if len(problems) > 0 {
			out.Verdict, out.Detail = Fail, strings.Join(problems, "; ")
		}
		return out
	}
	if len(unexpected) > 0 {
		problems = append(problems, fmt.Sprintf("answered by pods that are not expected endpoints: %s", strings.Join(unexpected, ", ")))
	}
	detail := fmt.Sprintf("%d/%d ok", ok, n)
	if sp.AffinityClientIP {
		if len(out.Counts) > 1 {
			problems = append(problems, fmt.Sprintf("session affinity broken: one client reached %d pods %v", len(out.Counts), out.Counts))
		}
		detail += ", affinity held (one pod)"
	} else {
		var missing []string
		observed := make([]int, 0, len(expected))
		for pod := range expected {
			if out.Counts[pod] == 0 {
				missing = append(missing, pod)
			}
			observed = append(observed, out.Counts[pod])
		}
		sort.Strings(missing)
		detail += fmt.Sprintf(", %d/%d endpoints reached", len(expected)-len(missing), len(expected))
		if len(missing) > 0 {
			problems = append(problems, "endpoints never reached: "+strings.Join(missing, ", "))
		}
		if len(observed) > 1 && ok == n {
			chi2, _, pv, err := stats.ChiSquareGOF(observed, stats.Uniform(len(observed)))
			if err == nil {
				out.PValue = pv
				detail += fmt.Sprintf(", chi2=%.2f p=%.3g", chi2, pv)
				if pv < MinPValue {
					problems = append(problems, fmt.Sprintf("selection is not uniform (p=%.3g < %g): %v", pv, MinPValue, out.Counts))
				}
			}
		}
	}
	out.Verdict, out.Detail = Pass, detail+warmup
	if len(problems) > 0 {
		out.Verdict, out.Detail = Fail, strings.Join(problems, "; ")
	}
	return out
}

// Bounds of converge's warm-up.
const (
	convergeProbesPerEndpoint = 10
	convergeTime              = 5 * time.Second
)

// converge sends probes, not counted, until every expected pod has answered once, within
// convergeProbesPerEndpoint probes per endpoint and convergeTime, and returns the evidence
// for the outcome's detail ("" when the first probes saw every endpoint).
//
// A proxy that is not ours says it has synced through its metrics only (upstream
// kube-proxy: the lab's wait reads its sync counters), and may answer a Service before it
// has programmed the last of its endpoints. Probes counted from then on would have a share
// skewed towards the endpoints programmed first, and the chi-square test fails a proxy
// that is right: 10/17/33 of 60 over 3 endpoints, p = 0.00096, once in CI on
// kube-proxy-nftables. The check judges the proxy's steady state, so it starts counting
// once every endpoint answered; a path where some never does still fails ("endpoints
// never reached") on the counted probes.
func converge(ctx context.Context, pr Requester, target probe.Destination, expected map[string]bool, opts probe.Options) string {
	seen := map[string]bool{}
	deadline := time.Now().Add(convergeTime)
	sent := 0
	for sent < convergeProbesPerEndpoint*len(expected) && time.Now().Before(deadline) && ctx.Err() == nil {
		res := pr.Request(ctx, target, opts)
		sent++
		if res.Err == nil && expected[res.Answer.Pod] {
			seen[res.Answer.Pod] = true
			if len(seen) == len(expected) {
				break
			}
		}
	}
	if len(seen) == len(expected) && sent <= 2*len(expected) {
		return ""
	}
	return fmt.Sprintf(" (after %d warm-up probes, %d/%d endpoints answering)", sent, len(seen), len(expected))
}

// checkNoAnswer checks a path that must not reach any pod: refused when the service has
// no endpoints at all, dropped (timeout) when a Local policy leaves this node none.
func checkNoAnswer(ctx context.Context, pr Requester, target probe.Destination, o Options, p path, out Outcome) Outcome {
	want, what := probe.Timeout, "dropped (Local policy, no local endpoints)"
	if p.reject {
		want, what = probe.Refused, "refused (no endpoints)"
	}
	timeout := o.Timeout
	if want == probe.Timeout {
		timeout = min(timeout, time.Second)
	}
	tally := ProbeN(ctx, pr, target, 3, probe.Options{Timeout: timeout}, 0)
	out.Counts = tally.Pods
	out.Verdict, out.Detail = Pass, fmt.Sprintf("%d/%d %s", tally.Classes[want], tally.N, what)
	if tally.Classes[want] != tally.N {
		out.Verdict = Fail
		out.Detail = fmt.Sprintf("expected %s, got %s", what, tally.ClassSummary())
	}
	return out
}

func portLabel(sp *backends.ServicePort) string {
	if sp.Name.Port == "" {
		return fmt.Sprintf("%d/%s", sp.Port, sp.Protocol())
	}
	return fmt.Sprintf("%s %d/%s", sp.Name.Port, sp.Port, sp.Protocol())
}

// Failed reports whether any outcome failed.
func Failed(outs []Outcome) bool {
	for _, o := range outs {
		if o.Verdict == Fail {
			return true
		}
	}
	return false
}

// NotCheckedCount counts the paths that could not be checked.
func NotCheckedCount(outs []Outcome) int {
	n := 0
	for _, o := range outs {
		if o.Verdict == NotChecked {
			n++
		}
	}
	return n
}
