//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/perrule"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/cluster"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/reports/stats"
	"kpbench.dev/kpbench/scenarios/check"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
	"kpbench.dev/kpbench/testbed"
)

// synthPodsTotal is how many lab pods back the synthetic services (enough for the
// 10-endpoint distribution service).
const synthPodsTotal = 10

// ensureSynthPods creates the lab pods that synthetic services point at, spread over nodes.
func (r *backendRun) ensureSynthPods(ctx context.Context) error {
	if r.synthPods != nil {
		return nil
	}
	nodes := r.tb.Lab.Hosts(lab.KindNode)
	for i := range synthPodsTotal {
		node := nodes[i%len(nodes)]
		h, err := r.tb.Lab.AddPod(ctx, lab.PodSpec{Name: fmt.Sprintf("synth-%d", i), Node: node.Name})
		if err != nil {
			return err
		}
		r.synthPods = append(r.synthPods, synth.Backend{IP: h.IP, Node: node.Name})
	}
	r.synthGen = map[int]int{}
	return nil
}

func (r *backendRun) churn(ctx context.Context, c *ChurnStep) error {
	if err := r.ensureSynthPods(ctx); err != nil {
		return err
	}
	t := synth.Template{Port: c.Template.Port, Protocol: corev1.Protocol(c.Template.Protocol), Type: corev1.ServiceType(c.Template.Type), EndpointsPerService: c.EndpointsPerService}
	if t.EndpointsPerService > len(r.synthPods) {
		return fmt.Errorf("churn: %d endpoints per service, but the synthetic services share %d pods", t.EndpointsPerService, len(r.synthPods))
	}
	r.template = t
	if c.Pattern == "mixed" {
		return r.churnMixed(ctx, c) // runner_churn.go
	}
	// changes returns the objects of change k of this step.
	var total int
	var change func(k int) ([]runtime.Object, error)
	var deleteK func(ctx context.Context, k int) error
	switch c.Pattern {
	case "add":
		first := r.synthCount
		total = c.Services
		change = func(k int) ([]runtime.Object, error) {
			return synth.Services(first+k, first+k+1, t, r.synthPods)
		}
	case "update":
		if r.synthCount == 0 {
			return fmt.Errorf("churn update: no synthetic services yet (add some first)")
		}
		change = func(int) ([]runtime.Object, error) {
			i := r.churnNext % min(r.synthCount, c.Services)
			r.churnNext++
			r.synthGen[i]++
			return []runtime.Object{synth.Slice(i, r.synthGen[i], t, r.synthPods)}, nil
		}
		total = -1 // bounded by Duration
	case "delete":
		total = min(c.Services, r.synthCount)
		deleteK = func(ctx context.Context, k int) error {
			i := r.synthCount - 1
			if err := r.tb.Cluster.Delete(ctx, cluster.KindEndpointSlice, synth.Namespace, synth.Name(i)+"-synth"); err != nil {
				return err
			}
			if err := r.tb.Cluster.Delete(ctx, cluster.KindService, synth.Namespace, synth.Name(i)); err != nil {
				return err
			}
			r.synthCount--
			return nil
		}
	default:
		return fmt.Errorf("churn: unknown pattern %q", c.Pattern)
	}
	apply := func(ctx context.Context, k, n int) error {
		if deleteK != nil {
			for j := range n {
				if err := deleteK(ctx, k+j); err != nil {
					return err
				}
			}
			return nil
		}
		var objs []runtime.Object
		for j := range n {
			o, err := change(k + j)
			if err != nil {
				return err
			}
			objs = append(objs, o...)
		}
		if err := r.tb.Apply(ctx, objs...); err != nil {
			return err
		}
		if c.Pattern == "add" {
			r.synthCount += n
		}
		return nil
	}
	if c.AllAtOnce {
		if total < 0 {
			total = c.Services
		}
		return apply(ctx, 0, total)
	}
	// At a rate: batches every 100 ms, for Duration (update) or until total changes.
	deadline := time.Time{}
	if c.Duration != nil {
		deadline = time.Now().Add(c.Duration.Duration)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start, done := time.Now(), 0
	for {
		if total >= 0 && done >= total {
			return nil
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return nil
		}
		due := int(c.Rate*time.Since(start).Seconds()) - done
		if total >= 0 {
			due = min(due, total-done)
		}
		if due > 0 {
			if err := apply(ctx, done, due); err != nil {
				return err
			}
			done += due
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// resolveHost turns "client-0", "node-1", "pod:NAME" or "pod:NS/NAME" into a lab host.
func (r *backendRun) resolveHost(from string) (lab.Host, error) {
	if rest, ok := strings.CutPrefix(from, "pod:"); ok {
		ns, name := splitName(rest)
		pod, err := r.resolvePod(ns, name)
		if err != nil {
			return lab.Host{}, err
		}
		from = testbed.HostName(ns, pod)
	}
	h, ok := r.tb.Lab.Host(from)
	if !ok {
		return lab.Host{}, fmt.Errorf("no host %q in the lab", from)
	}
	return h, nil
}

// resolveTarget returns the address of a target and the service port behind it (nil for
// a literal address).
func (r *backendRun) resolveTarget(t Target) (netip.AddrPort, *backends.ServicePort, error) {
	if t.IPPort != "" {
		ap, err := netip.ParseAddrPort(t.IPPort)
		return ap, nil, err
	}
	ns, name := splitName(t.Service)
	view := backends.BuildState(backends.NodeView{}, backends.ViewOptions{}, r.tb.Cluster.Services(), r.tb.Cluster.EndpointSlices())
	var sp *backends.ServicePort
	for _, p := range view.Services {
		if p.Name.Namespace == ns && p.Name.Name == name && (t.Port == "" || p.Name.Port == t.Port) {
			sp = p
			break
		}
	}
	if sp == nil {
		// A Service the proxy ignores (labelled service.kubernetes.io/service-proxy-name)
		// still has a ClusterIP to probe: the probe shows that nothing
		// handles it.
		if ap, ok := r.unproxiedClusterIP(ns, name, t); ok {
			return ap, nil, nil
		}
		return netip.AddrPort{}, nil, fmt.Errorf("no proxied service port %s/%s %s (headless and ExternalName Services have none)", ns, name, t.Port)
	}
	switch t.Address {
	case "", AddressClusterIP:
		return netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port)), sp, nil
	case AddressNodePort:
		if sp.NodePort == 0 {
			return netip.AddrPort{}, sp, fmt.Errorf("service %s/%s has no node port", ns, name)
		}
		node := t.Node
		if node == "" {
			node = lab.NodeName(0)
		}
		h, ok := r.tb.Lab.Host(node)
		if !ok {
			return netip.AddrPort{}, sp, fmt.Errorf("no node %q", node)
		}
		return netip.AddrPortFrom(h.IP, uint16(sp.NodePort)), sp, nil
	case AddressLoadBalancer, AddressExternalIP:
		ips := sp.LoadBalancerIPs
		if t.Address == AddressExternalIP {
			ips = sp.ExternalIPs
		}
		if len(ips) == 0 {
			return netip.AddrPort{}, sp, fmt.Errorf("service %s/%s has no %s address", ns, name, t.Address)
		}
		return netip.AddrPortFrom(ips[0], uint16(sp.Port)), sp, nil
	}
	return netip.AddrPort{}, sp, fmt.Errorf("unknown address kind %q", t.Address)
}

// expectCase begins the case of an expect step: ctx bounded by the step's timeout (default
// 30s), and record, which appends the case (pass, or fail with err and its evidence) and
// returns err.
func (r *backendRun) expectCase(ctx context.Context, e *ExpectStep, name string) (context.Context, context.CancelFunc, func(err error, evidence string) error) {
	start := time.Now()
	record := func(err error, evidence string) error {
		c := reports.Case{Name: name, Backend: r.backend, Result: reports.CasePass, Evidence: evidence, Duration: time.Since(start)}
		if err != nil {
			c.Result, c.Reason = reports.CaseFail, err.Error()
		}
		r.res.Cases = append(r.res.Cases, c)
		return err
	}
	timeout := 30 * time.Second
	if e.Timeout != nil {
		timeout = e.Timeout.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, cancel, record
}

// expect probes and judges; it records a case either way.
func (r *backendRun) expect(ctx context.Context, e *ExpectStep, name string) error {
	if e.Expectation == ExpectHTTPStatus {
		return r.expectHTTPStatus(ctx, e, name) // runner_health.go
	}
	ctx, cancel, record := r.expectCase(ctx, e, name)
	defer cancel()
	from, err := r.resolveHost(e.From)
	if err != nil {
		return record(err, "")
	}
	addr, sp, err := r.resolveTarget(e.To)
	if err != nil {
		return record(err, "")
	}
	if e.To.Address == AddressLoadBalancer || e.To.Address == AddressExternalIP {
		if err := r.tb.Lab.AddClientRoute(ctx, netip.PrefixFrom(addr.Addr(), 32)); err != nil {
			return record(err, "")
		}
	}
	proto := lab.Protocol(strings.ToUpper(e.Protocol))
	if proto == "" {
		proto = lab.TCP
		if sp != nil {
			proto = lab.Protocol(sp.Protocol())
		}
	}
	pr, err := r.tb.Lab.Prober(from.Name)
	if err != nil {
		return record(err, "")
	}
	count := e.Count
	if count == 0 {
		count = 1
	}
	probeTimeout := 2 * time.Second
	if e.Expectation == ExpectDropped {
		probeTimeout = time.Second
	}
	target := probe.Target{Addr: addr, Protocol: proto}
	var interval time.Duration
	if e.Interval != nil {
		interval = e.Interval.Duration
	}
	tally := check.ProbeN(ctx, pr, target, count, probe.Options{Timeout: probeTimeout, SourcePort: uint16(e.SourcePort)}, interval)
	evidence := fmt.Sprintf("%s → %s/%s: %d probes: %s; answers %v", from.Name, addr, proto, tally.N, tally.ClassSummary(), tally.Pods)
	if tally.N < count {
		return record(fmt.Errorf("only %d of %d probes sent before the step's timeout", tally.N, count), evidence)
	}
	return record(r.judge(e, from, sp, tally), evidence)
}

func (r *backendRun) judge(e *ExpectStep, from lab.Host, sp *backends.ServicePort, t check.Tally) error {
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
		expected := r.readyPods(sp)
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

// readyPods returns the pod names of the endpoints traffic may use (ready, else serving
// and terminating), sorted.
func (r *backendRun) readyPods(sp *backends.ServicePort) []string {
	byIP := map[netip.Addr]string{}
	for _, h := range r.tb.Lab.Hosts(lab.KindPod) {
		byIP[h.IP] = h.Name
	}
	var out []string
	for _, ep := range backends.CategorizeEndpoints(sp).Cluster {
		out = append(out, byIP[ep.IP])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// measure runs a named measurement and adds its results to the run.
func (r *backendRun) measure(ctx context.Context, m *MeasureStep) error {
	size := r.synthCount // the ladder's size; else every Service there is
	if size == 0 {
		size = len(r.tb.Cluster.Services())
	}
	labels := map[string]string{"services": strconv.Itoa(size)}
	for k, v := range r.opts.Labels {
		labels[k] = v
	}
	param := func(key, def string) string {
		if v, ok := m.Params[key]; ok {
			return fmt.Sprint(v)
		}
		return def
	}
	intParam := func(key string, def int) (int, error) {
		v, err := strconv.Atoi(param(key, strconv.Itoa(def)))
		if err != nil || v < 1 {
			return 0, fmt.Errorf("measure %s: params.%s: want a positive integer, got %q", m.Name, key, param(key, ""))
		}
		return v, nil
	}
	from := param("from", testbed.ProbePod(lab.NodeName(0)))
	var out []reports.Measurement
	switch m.Name {
	case "sync":
		repeats, err := intParam("repeats", 3)
		if err != nil {
			return err
		}
		full := param("kind", "full") == "full"
		change := func(ctx context.Context, i int) error {
			if r.synthCount == 0 {
				return fmt.Errorf("a partial sync needs synthetic services (a churn step) to change")
			}
			k := r.synthCount / 2
			r.synthGen[k]++
			return r.tb.Apply(ctx, synth.Slice(k, r.synthGen[k], r.template, r.synthPods))
		}
		ms, err := measure.Sync(ctx, r.tb, full, repeats, change, labels)
		if err != nil {
			return err
		}
		out = ms
	case "lookup":
		samples, err := intParam("samples", 200)
		if err != nil {
			return err
		}
		if r.synthCount == 0 {
			return fmt.Errorf("measure lookup: needs synthetic services (a churn step)")
		}
		targets := map[string]netip.AddrPort{}
		for pos, i := range map[string]int{"first": 0, "middle": r.synthCount / 2, "last": r.synthCount - 1} {
			ap, _, err := r.resolveTarget(Target{Service: synth.Namespace + "/" + synth.Name(i)})
			if err != nil {
				return err
			}
			targets[pos] = ap
		}
		ms, err := measure.Lookup(ctx, r.tb, from, targets, samples, labels)
		if err != nil {
			return err
		}
		out = ms
	case "distribution":
		n, err := intParam("endpoints", 10)
		if err != nil {
			return err
		}
		conns, err := intParam("connections", 20*n*5)
		if err != nil {
			return err
		}
		dp, err := parseDistParams(param)
		if err != nil {
			return fmt.Errorf("measure distribution: %w", err)
		}
		mm, err := r.distribution(ctx, from, n, conns, labels, dp)
		if err != nil {
			return err
		}
		out = append(out, mm)
	case "rules":
		n, err := measure.KernelRules(ctx, r.tb)
		if err != nil {
			return err
		}
		out = append(out, reports.Measurement{Name: reports.MeasureRules, Params: clone(labels), Unit: reports.UnitCount, Samples: []float64{float64(n)}})
		if s, err := measure.KernelMemory(); err == nil && r.mem0 > 0 {
			out = append(out, reports.Measurement{Name: "rules-memory", Params: clone(labels), Unit: reports.UnitBytes, Samples: []float64{float64(s - r.mem0)}})
		}
	case reports.MeasurePerRule:
		mm, err := r.perRule(ctx, labels)
		if err != nil {
			return err
		}
		out = append(out, mm)
	case "programming-latency": // both halves after a probed churn (runner_churn.go)
		out = append(out, r.programmingLatency(labels)...)
	case "churn": // correctness, rate and syncs of the last probed churn (runner_churn.go)
		ms, err := r.churnMeasurements(labels)
		if err != nil {
			return err
		}
		out = ms
	case "throughput": // adds its own results (see throughput_step.go)
		return r.throughput(ctx, m, labels)
	default:
		return fmt.Errorf("unknown measurement %q: allowed are sync, lookup, distribution, rules, perrule, programming-latency, churn, throughput", m.Name)
	}
	for _, mm := range out {
		r.res.Add(r.backend, mm)
	}
	return r.checkLimits(m, out)
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// distParams are the optional params of the distribution measurement.
//
//   - scheduler: switch every node's IPVS scheduler (rr, wrr, sh, lc, mh, ...) from here on,
//     as restarting kube-proxy with another ipvs.scheduler would (ipvs backend only);
//   - weights: "w0,w1,...", one weight per endpoint in pod-name order, set on the IPVS real
//     servers for this measurement only; the expected shares become weight/sum. A kpbench
//     extension: kube-proxy gives every real server weight 1 (ipvs backend only);
//   - affinity: "ClientIP" gives the service sessionAffinity ClientIP (any backend);
//   - expected: "uniform" (default), "weights" (default with weights) or "sticky": one
//     endpoint must take every connection from the fixed source (sh, ClientIP affinity).
//
// Every result carries chi2, df and p_value against the expected shares, max_deviation (the
// largest |count - expected count| over the endpoints) and same_backend_share (the busiest
// endpoint's share of the answered connections).
type distParams struct {
	scheduler string
	weights   []int
	affinity  bool
	expected  string
}

// parseDistParams reads distParams through the measurement's param lookup.
func parseDistParams(param func(key, def string) string) (distParams, error) {
	dp := distParams{scheduler: param("scheduler", ""), expected: param("expected", "")}
	if w := param("weights", ""); w != "" {
		for _, f := range strings.Split(w, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 1 || v > 65535 {
				return dp, fmt.Errorf("params.weights: %q: want comma-separated integers 1..65535", w)
			}
			dp.weights = append(dp.weights, v)
		}
	}
	switch a := param("affinity", "None"); a {
	case "None":
	case "ClientIP":
		dp.affinity = true
	default:
		return dp, fmt.Errorf("params.affinity: %q: want None or ClientIP", a)
	}
	if dp.expected == "" {
		dp.expected = "uniform"
		if dp.weights != nil {
			dp.expected = "weights"
		}
	}
	if !slices.Contains([]string{"uniform", "weights", "sticky"}, dp.expected) {
		return dp, fmt.Errorf("params.expected: %q: want uniform, weights or sticky", dp.expected)
	}
	if dp.expected == "weights" && dp.weights == nil {
		return dp, fmt.Errorf("params.expected: weights needs params.weights")
	}
	return dp, nil
}

// ipvsExperiment is what the ipvs backend offers experiments (backends/ipvs.Backend).
type ipvsExperiment interface {
	SetScheduler(name string) error
	SetWeights(w map[netip.Addr]int) error
}

// ipvsAgents returns every node's ipvs backend, or an error naming the param that needs it.
func (r *backendRun) ipvsAgents(what string) ([]ipvsExperiment, error) {
	var out []ipvsExperiment
	for _, ag := range r.tb.Agents {
		b, ok := ag.Backend().(ipvsExperiment)
		if !ok {
			return nil, fmt.Errorf("measure distribution: params.%s needs the ipvs backend, not %s", what, r.backend)
		}
		out = append(out, b)
	}
	return out, nil
}

// forceFullSyncs makes every node's agent sync fully now (after an experiment override).
func (r *backendRun) forceFullSyncs(ctx context.Context) error {
	for _, ag := range r.tb.Agents {
		if _, err := ag.ForceSync(ctx, true); err != nil {
			return fmt.Errorf("measure distribution: sync %s: %w", ag.Node(), err)
		}
	}
	return nil
}

// distribution creates (once) a service over n of the synthetic pods and measures how
// new connections spread over them.
func (r *backendRun) distribution(ctx context.Context, from string, n, conns int, labels map[string]string, dp distParams) (reports.Measurement, error) {
	if err := r.ensureSynthPods(ctx); err != nil {
		return reports.Measurement{}, err
	}
	if n > len(r.synthPods) {
		return reports.Measurement{}, fmt.Errorf("measure distribution: at most %d endpoints", len(r.synthPods))
	}
	if dp.weights != nil && len(dp.weights) != n {
		return reports.Measurement{}, fmt.Errorf("measure distribution: params.weights has %d weights for %d endpoints", len(dp.weights), n)
	}
	if dp.scheduler != "" {
		bs, err := r.ipvsAgents("scheduler")
		if err != nil {
			return reports.Measurement{}, err
		}
		for _, b := range bs {
			if err := b.SetScheduler(dp.scheduler); err != nil {
				return reports.Measurement{}, fmt.Errorf("measure distribution: %w", err)
			}
		}
		labels["scheduler"] = dp.scheduler
	}
	const distIndex = 999999 // a name that sorts after every ladder service
	t := synth.Template{EndpointsPerService: n, AffinityClientIP: dp.affinity}
	if err := r.tb.Apply(ctx, synth.Service(distIndex, t), synth.Slice(distIndex, 0, t, r.synthPods)); err != nil {
		return reports.Measurement{}, err
	}
	if err := r.tb.WaitSynced(ctx); err != nil {
		return reports.Measurement{}, err
	}
	target, sp, err := r.resolveTarget(Target{Service: synth.Namespace + "/" + synth.Name(distIndex)})
	if err != nil {
		return reports.Measurement{}, err
	}
	pods := r.readyPods(sp)
	var shares []float64
	if dp.weights != nil {
		bs, err := r.ipvsAgents("weights")
		if err != nil {
			return reports.Measurement{}, err
		}
		byName := map[string]netip.Addr{}
		for _, h := range r.tb.Lab.Hosts(lab.KindPod) {
			byName[h.Name] = h.IP
		}
		w, sum := map[netip.Addr]int{}, 0
		for i, pod := range pods {
			w[byName[pod]] = dp.weights[i]
			sum += dp.weights[i]
		}
		for _, v := range dp.weights {
			shares = append(shares, float64(v)/float64(sum))
		}
		for _, b := range bs {
			if err := b.SetWeights(w); err != nil {
				return reports.Measurement{}, fmt.Errorf("measure distribution: %w", err)
			}
		}
		defer func() { // weights hold for this measurement only
			for _, b := range bs {
				_ = b.SetWeights(nil)
			}
			_ = r.forceFullSyncs(context.WithoutCancel(ctx))
		}()
		ws := make([]string, len(dp.weights))
		for i, v := range dp.weights {
			ws[i] = strconv.Itoa(v)
		}
		labels["weights"] = strings.Join(ws, ",")
	}
	if dp.scheduler != "" || dp.weights != nil {
		if err := r.forceFullSyncs(ctx); err != nil {
			return reports.Measurement{}, err
		}
	}
	if dp.affinity {
		labels["affinity"] = "ClientIP"
	}
	m, err := measure.Distribution(ctx, r.tb, from, target, lab.TCP, pods, shares, conns, labels)
	if err != nil {
		return m, err
	}
	m.Params["expected"] = dp.expected
	answered, top := 0.0, 0.0
	for _, c := range m.Samples {
		answered += c
		top = max(top, c)
	}
	if answered > 0 {
		dev := 0.0
		for i, c := range m.Samples {
			dev = max(dev, math.Abs(c-answered*m.Extra["share_"+strconv.Itoa(i)]))
		}
		m.Extra["max_deviation"] = dev
		m.Extra["same_backend_share"] = top / answered
	}
	return m, nil
}

// unproxiedClusterIP returns the ClusterIP:port of a Service the proxy does not handle
// (kept out by a label), for a clusterIP target.
func (r *backendRun) unproxiedClusterIP(ns, name string, t Target) (netip.AddrPort, bool) {
	if t.Address != "" && t.Address != AddressClusterIP {
		return netip.AddrPort{}, false
	}
	for _, svc := range r.tb.Cluster.Services() {
		if svc.Namespace != ns || svc.Name != name {
			continue
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil {
			return netip.AddrPort{}, false
		}
		for _, p := range svc.Spec.Ports {
			if t.Port == "" || p.Name == t.Port {
				return netip.AddrPortFrom(ip, uint16(p.Port)), true
			}
		}
	}
	return netip.AddrPort{}, false
}

// ruleTimer is what the iptables-perrule backend reports: the cost of each iptables call.
type ruleTimer interface{ RuleTimings() []perrule.RuleTiming }

// perRule adds one more synthetic Service and reports how long each of its rules took to
// add, one iptables call each, at the table's current size: the 2017 curve.
func (r *backendRun) perRule(ctx context.Context, labels map[string]string) (reports.Measurement, error) {
	rt, ok := r.tb.Agents[0].Backend().(ruleTimer)
	if !ok {
		return reports.Measurement{}, fmt.Errorf("measure perrule: backend %s adds rules in bulk; use iptables-perrule", r.backend)
	}
	if err := r.churn(ctx, &ChurnStep{Pattern: "add", Services: 1, EndpointsPerService: max(1, r.template.EndpointsPerService), AllAtOnce: true}); err != nil {
		return reports.Measurement{}, err
	}
	if err := r.tb.WaitSynced(ctx); err != nil {
		return reports.Measurement{}, err
	}
	timings := rt.RuleTimings() // of the last sync: the one that added the service
	if len(timings) == 0 {
		return reports.Measurement{}, fmt.Errorf("measure perrule: adding a service added no rule")
	}
	m := reports.Measurement{Name: reports.MeasurePerRule, Params: clone(labels), Unit: reports.UnitSeconds,
		Extra: map[string]float64{"rules_added": float64(len(timings))}}
	m.Params["base"] = strconv.Itoa(timings[0].TableRules)
	var total time.Duration
	for _, t := range timings {
		m.Samples = append(m.Samples, t.Duration.Seconds())
		total += t.Duration
	}
	m.Extra["service_add_seconds"] = total.Seconds()
	return m, nil
}
