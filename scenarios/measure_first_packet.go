//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
)

// MaxFirstPacketPositions bounds the ranks one first-packet measurement probes.
const MaxFirstPacketPositions = 101

// FirstPacketParams are the first-packet measurement's parameters.
type FirstPacketParams struct {
	// Positions is the number of evenly spaced ranks probed, 2-101 (default 5: 0%, 25%,
	// 50%, 75%, 100%).
	Positions int `json:"positions,omitempty"`
	// Samples is the number of connects per rank, 1-100000 (default 100).
	Samples int `json:"samples,omitempty"`
	// From is the host that connects (default node-0's probe pod).
	From string `json:"from,omitempty"`
}

// Default sets 5 positions of 100 samples.
func (p *FirstPacketParams) Default() {
	setDefault(&p.Positions, 5)
	setDefault(&p.Samples, 100)
}

// Validate checks the params; the Services probed are generated ones, which must exist at
// this step, as many as the ranks.
func (p *FirstPacketParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	step, path := path, path.Child("params")
	errs := intRange(path.Child("positions"), p.Positions, 2, MaxFirstPacketPositions)
	errs = append(errs, intRange(path.Child("samples"), p.Samples, 1, MaxProbeCount)...)
	if p.From != "" {
		errs = append(errs, v.CheckHost(p.From, path.Child("from"))...)
	}
	if v.SyntheticServices < p.Positions {
		errs = append(errs, field.Invalid(step.Child("name"), reports.MeasureFirstPacket, fmt.Sprintf("probes %d ranks of the generated Services, and %d exist at this step: add more first (a churn with pattern add)", p.Positions, v.SyntheticServices)))
	}
	return errs
}

// ranks returns the index of the generated Service at each of k evenly spaced ranks of n.
func ranks(n, k int) []int {
	out := make([]int, k)
	for j := range k {
		out[j] = (j*(n-1) + (k-1)/2) / (k - 1) // rounded
	}
	return out
}

// Measure connects to every rank, interleaved.
func (p *FirstPacketParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	n := s.synth.count
	if n < p.Positions {
		return nil, fmt.Errorf("first-packet: %d ranks of %d generated services", p.Positions, n)
	}
	targets := map[string]netip.AddrPort{}
	index, label := map[string]int{}, map[string]string{}
	for j, i := range ranks(n, p.Positions) {
		ap, _, err := resolveDestination(s.Cluster, Destination{Service: synth.Namespace + "/" + synth.Name(i)})
		if err != nil {
			return nil, err
		}
		// Zero-padded so that measure.Lookup's order (sorted names) is the rank's, and the
		// last rank is the established control's target.
		pct := j * 100 / (p.Positions - 1)
		rank := fmt.Sprintf("%03d", pct)
		targets[rank], index[rank], label[rank] = ap, i, fmt.Sprintf("%d%%", pct)
	}
	from := fromOrProbePod(s, p.From)
	pr, err := s.Cluster.Prober(from)
	if err != nil {
		return nil, err
	}
	ms, err := measure.Lookup(ctx, probeProgress(s, pr, p.Samples*(len(targets)+1)), from, targets, p.Samples, s.Labels())
	if err != nil {
		return nil, fmt.Errorf("first-packet: %w", err)
	}
	for i := range ms {
		m := &ms[i]
		m.Name = reports.MeasureFirstPacket
		if rank := m.Params["position"]; m.Params["kind"] == "connect" {
			m.Params["rank"], m.Params["index"] = label[rank], strconv.Itoa(index[rank])
		}
		delete(m.Params, "position")
	}
	return ms, nil
}
