//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
)

// LookupParams are the lookup measurement's parameters.
type LookupParams struct {
	// Samples is the number of connects per position (and of requests of the control),
	// 1-100000 (default 200).
	Samples int `json:"samples,omitempty"`
	// From is the host that connects (default node-0's probe pod, probe-node-0).
	From string `json:"from,omitempty"`
}

// Default sets 200 samples.
func (p *LookupParams) Default() {
	setDefault(&p.Samples, 200)
}

// Validate checks the samples and the host; the targets are generated Services, which
// must exist at this step.
func (p *LookupParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	step, path := path, path.Child("params")
	errs := intRange(path.Child("samples"), p.Samples, 1, MaxProbeCount)
	if p.From != "" {
		errs = append(errs, v.CheckHost(p.From, path.Child("from"))...)
	}
	if v.SyntheticServices == 0 {
		errs = append(errs, field.Invalid(step.Child("name"), "lookup", "probes the first, middle and last generated Service, and none exists at this step: add some first (a churn with pattern add)"))
	}
	return errs
}

// Measure connects to the three positions.
func (p *LookupParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	n := s.synth.count
	if n == 0 {
		return nil, fmt.Errorf("lookup: needs generated services (a churn step)")
	}
	targets := map[string]netip.AddrPort{}
	for pos, i := range map[string]int{"first": 0, "middle": n / 2, "last": n - 1} {
		ap, _, err := resolveDestination(s.Cluster, Destination{Service: synth.Namespace + "/" + synth.Name(i)})
		if err != nil {
			return nil, err
		}
		targets[pos] = ap
	}
	from := fromOrProbePod(s, p.From)
	pr, err := s.Cluster.Prober(from)
	if err != nil {
		return nil, err
	}
	// Rounds of one connect to every target and one request of the established control.
	return measure.Lookup(ctx, probeProgress(s, pr, p.Samples*(len(targets)+1)), from, targets, p.Samples, s.Labels())
}

// fromOrProbePod returns the host a measurement probes from: from, resolved ("pod:NAME"
// names a cluster pod), or node-0's probe pod.
func fromOrProbePod(s *Session, from string) string {
	if from == "" {
		return s.Cluster.ProbeHost(lab.NodeName(0))
	}
	if h, err := resolveHost(s.Cluster, from); err == nil {
		return h.Name
	}
	return from
}
