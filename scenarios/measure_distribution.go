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

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
)

// Expected shares of a distribution.
const (
	ExpectedUniform = "uniform"
	ExpectedWeights = "weights"
	ExpectedSticky  = "sticky"
)

// DistributionParams are the distribution measurement's parameters.
type DistributionParams struct {
	// Endpoints of the measured Service, 2-10 (default 10).
	Endpoints int `json:"endpoints,omitempty"`
	// Connections opened, 1-100000 (default 100 per endpoint); uniform and weighted
	// shares need at least 5 expected per endpoint for the chi-square test.
	Connections int `json:"connections,omitempty"`
	// From is the host that connects (default node-0's probe pod).
	From string `json:"from,omitempty"`
	// Scheduler switches every node's IPVS scheduler (rr, wrr, sh, lc, mh, ...) from
	// here on, as restarting kube-proxy with another ipvs.scheduler would (backends with
	// IPVS experiments only).
	Scheduler string `json:"scheduler,omitempty"`
	// Weights is "w0,w1,...", one weight (1-65535) per endpoint in pod-name order, set
	// on the IPVS real servers for this measurement only; the expected shares become
	// weight/sum. A kpbench extension: kube-proxy gives every real server weight 1
	// (backends with IPVS experiments only).
	Weights string `json:"weights,omitempty"`
	// Affinity "ClientIP" gives the Service sessionAffinity ClientIP (default None).
	Affinity string `json:"affinity,omitempty"`
	// Expected is uniform (default), weights (default with weights) or sticky: one
	// endpoint takes every connection from the fixed source (sh, ClientIP affinity).
	Expected string `json:"expected,omitempty"`

	weights []int // parsed Weights
}

// Default sets 10 endpoints, 100 connections per endpoint, and the expected shares.
func (p *DistributionParams) Default() {
	setDefault(&p.Endpoints, SyntheticPods)
	setDefault(&p.Connections, 100*p.Endpoints)
	setDefault(&p.Affinity, "None")
	if p.Expected == "" {
		p.Expected = ExpectedUniform
		if p.Weights != "" {
			p.Expected = ExpectedWeights
		}
	}
}

// parseWeights reads "w0,w1,...".
func parseWeights(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 || v > 65535 {
			return nil, fmt.Errorf("want comma-separated integers 1-65535")
		}
		out = append(out, v)
	}
	return out, nil
}

// Validate checks every parameter; a distribution over one endpoint is refused (there
// is nothing to spread), as are too few connections for the test and IPVS experiments
// on backends without them.
func (p *DistributionParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	path = path.Child("params")
	var errs field.ErrorList
	if p.Endpoints < 2 || p.Endpoints > SyntheticPods {
		errs = append(errs, field.Invalid(path.Child("endpoints"), p.Endpoints, fmt.Sprintf("must be in range 2-%d: a distribution needs endpoints to spread over, and the generated Services share %d pods", SyntheticPods, SyntheticPods)))
	}
	errs = append(errs, intRange(path.Child("connections"), p.Connections, 1, MaxProbeCount)...)
	if p.From != "" {
		errs = append(errs, v.CheckHost(p.From, path.Child("from"))...)
	}
	p.weights = nil
	if p.Weights != "" {
		w, err := parseWeights(p.Weights)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("weights"), p.Weights, err.Error()))
		case len(w) != p.Endpoints:
			errs = append(errs, field.Invalid(path.Child("weights"), p.Weights, fmt.Sprintf("has %d weights for %d endpoints", len(w), p.Endpoints)))
		default:
			p.weights = w
		}
	}
	switch p.Affinity {
	case "None", "ClientIP":
	default:
		errs = append(errs, field.NotSupported(path.Child("affinity"), p.Affinity, []string{"None", "ClientIP"}))
	}
	switch p.Expected {
	case ExpectedUniform, ExpectedSticky:
	case ExpectedWeights:
		if p.Weights == "" {
			errs = append(errs, field.Required(path.Child("weights"), "expected: weights needs the weights"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("expected"), p.Expected, []string{ExpectedUniform, ExpectedWeights, ExpectedSticky}))
	}
	if p.Scheduler != "" && !slices.Contains(ipvsSchedulers(), p.Scheduler) {
		errs = append(errs, field.NotSupported(path.Child("scheduler"), p.Scheduler, ipvsSchedulers()))
	}
	if len(errs) == 0 && p.Expected != ExpectedSticky && p.Endpoints > 0 {
		share := 1 / float64(p.Endpoints)
		if p.weights != nil {
			sum := 0
			for _, w := range p.weights {
				sum += w
			}
			share = float64(slices.Min(p.weights)) / float64(sum)
		}
		if float64(p.Connections)*share < 5 {
			errs = append(errs, field.Invalid(path.Child("connections"), p.Connections, fmt.Sprintf("expects %.1f connections on the least likely endpoint: the chi-square test needs at least 5", float64(p.Connections)*share)))
		}
	}
	if p.Scheduler != "" {
		errs = append(errs, v.RequireCapability(CapabilityIPVSExperiments, path.Child("scheduler"), "switching the IPVS scheduler")...)
	}
	if p.Weights != "" {
		errs = append(errs, v.RequireCapability(CapabilityIPVSExperiments, path.Child("weights"), "IPVS weights")...)
	}
	return errs
}

// ipvsExperiments returns every node's IPVS experiment controls (the backends' facts
// registry hands them out), or an error naming the param that needs them.
func ipvsExperiments(s *Session, what string) ([]all.IPVSExperiments, error) {
	var out []all.IPVSExperiments
	for _, px := range s.Cluster.Proxies() {
		b, ok := all.IPVSExperimentsOf(px.Backend())
		if !ok {
			return nil, fmt.Errorf("distribution: params.%s needs a backend with IPVS experiments (ipvs), not %s", what, s.Backend)
		}
		out = append(out, b)
	}
	return out, nil
}

// forceFullSyncs makes every node's proxy sync fully now (after an experiment override).
func forceFullSyncs(ctx context.Context, s *Session) error {
	for _, px := range s.Cluster.Proxies() {
		if _, err := px.ForceSync(ctx, true); err != nil {
			return fmt.Errorf("distribution: sync %s: %w", px.Node(), err)
		}
	}
	return nil
}

// Measure creates (once) the Service and counts connections per endpoint.
func (p *DistributionParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	labels := s.Labels()
	if p.Scheduler != "" {
		bs, err := ipvsExperiments(s, "scheduler")
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			if err := b.SetScheduler(p.Scheduler); err != nil {
				return nil, fmt.Errorf("distribution: %w", err)
			}
		}
		labels["scheduler"] = p.Scheduler
	}
	t := synth.Template{EndpointsPerService: p.Endpoints, AffinityClientIP: p.Affinity == "ClientIP"}
	if err := s.applySynthService(ctx, distributionIndex, t); err != nil {
		return nil, fmt.Errorf("distribution: %w", err)
	}
	target, sp, err := resolveDestination(s.Cluster, Destination{Service: synth.Namespace + "/" + synth.Name(distributionIndex)})
	if err != nil {
		return nil, err
	}
	pods := readyPods(s.Cluster, sp)
	var shares []float64
	if p.weights != nil {
		bs, err := ipvsExperiments(s, "weights")
		if err != nil {
			return nil, err
		}
		byName := map[string]netip.Addr{}
		for _, h := range s.Cluster.Hosts(lab.KindPod) {
			byName[h.Name] = h.IP
		}
		w, sum := map[netip.Addr]int{}, 0
		for i, pod := range pods {
			w[byName[pod]] = p.weights[i]
			sum += p.weights[i]
		}
		for _, v := range p.weights {
			shares = append(shares, float64(v)/float64(sum))
		}
		for _, b := range bs {
			if err := b.SetWeights(w); err != nil {
				return nil, fmt.Errorf("distribution: %w", err)
			}
		}
		defer func() { // weights hold for this measurement only
			for _, b := range bs {
				_ = b.SetWeights(nil)
			}
			_ = forceFullSyncs(context.WithoutCancel(ctx), s)
		}()
		labels["weights"] = p.Weights
	}
	if p.Scheduler != "" || p.weights != nil {
		if err := forceFullSyncs(ctx, s); err != nil {
			return nil, err
		}
	}
	if p.Affinity == "ClientIP" {
		labels["affinity"] = "ClientIP"
	}
	pr, err := s.Cluster.Prober(fromOrProbePod(s, p.From))
	if err != nil {
		return nil, err
	}
	m, err := measure.Distribution(ctx, probeProgress(s, pr, p.Connections), target, lab.TCP, pods, shares, p.Connections, labels)
	if err != nil {
		return nil, err
	}
	m.Params["expected"] = p.Expected
	answered, top := 0.0, 0.0
	for _, c := range m.Samples {
		answered += c
		top = max(top, c)
	}
	if answered == 0 {
		return nil, fmt.Errorf("distribution: no connection of %d was answered (%g failed)", p.Connections, m.Extra["failed"])
	}
	dev := 0.0
	for i, c := range m.Samples {
		dev = max(dev, math.Abs(c-answered*m.Extra["share_"+strconv.Itoa(i)]))
	}
	m.Extra["max_deviation"] = dev
	m.Extra["same_backend_share"] = top / answered
	return []reports.Measurement{m}, nil
}
