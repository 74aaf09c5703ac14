//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
)

// Kinds of throughput load.
const (
	ThroughputConnections = string(probe.LoadConnections)
	ThroughputRequests    = string(probe.LoadRequests)
	ThroughputBoth        = "both"
)

// Bounds of the throughput measurement's parameters.
const (
	MaxThroughputWorkers  = 256
	MaxThroughputDuration = 5 * time.Minute
	MaxThroughputBaseline = time.Minute
)

// ThroughputParams are the throughput measurement's parameters.
type ThroughputParams struct {
	// Kind is connections, requests or both (default).
	Kind string `json:"kind,omitempty"`
	// Endpoints of the loaded Service, 1-10 (default 10).
	Endpoints int `json:"endpoints,omitempty"`
	// From is the comma-separated list of source hosts (default node-0's probe pod).
	From string `json:"from,omitempty"`
	// Workers per source host, 1-256 (default 8).
	Workers int `json:"workers,omitempty"`
	// Duration of each load window (default 3s, at most 5m).
	Duration *Duration `json:"duration,omitempty"`
	// MaxOps bounds the operations per host (default 1,000,000).
	MaxOps int `json:"maxOps,omitempty"`
	// Baseline is the idle window measured before the load, whose CPU use is subtracted
	// (default 500ms; "0s": none; at most 1m).
	Baseline *Duration `json:"baseline,omitempty"`
}

// Default fills the load's shape.
func (p *ThroughputParams) Default() {
	setDefault(&p.Kind, ThroughputBoth)
	setDefault(&p.Endpoints, SyntheticPods)
	setDefault(&p.Workers, probe.DefaultLoadWorkers)
	setDefault(&p.MaxOps, probe.DefaultLoadMaxOps)
	if p.Duration == nil {
		p.Duration = NewDuration(probe.DefaultLoadDuration)
	}
	if p.Baseline == nil {
		p.Baseline = NewDuration(500 * time.Millisecond)
	}
}

// sources returns the source hosts of From.
func (p *ThroughputParams) sources() []string {
	if p.From == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(p.From, ",") {
		out = append(out, strings.TrimSpace(f))
	}
	return out
}

// Validate checks the load's shape and its hosts.
func (p *ThroughputParams) Validate(v *Validation, path *field.Path) field.ErrorList {
	path = path.Child("params")
	var errs field.ErrorList
	switch p.Kind {
	case ThroughputConnections, ThroughputRequests, ThroughputBoth:
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), p.Kind, []string{ThroughputConnections, ThroughputRequests, ThroughputBoth}))
	}
	errs = append(errs, intRange(path.Child("endpoints"), p.Endpoints, 1, SyntheticPods)...)
	errs = append(errs, intRange(path.Child("workers"), p.Workers, 1, MaxThroughputWorkers)...)
	errs = append(errs, intRange(path.Child("maxOps"), p.MaxOps, 1, probe.DefaultLoadMaxOps*10)...)
	if d := p.Duration; d != nil && (d.Duration <= 0 || d.Duration > MaxThroughputDuration) {
		errs = append(errs, field.Invalid(path.Child("duration"), d.String(), fmt.Sprintf("must be a positive duration of at most %s", MaxThroughputDuration)))
	}
	if b := p.Baseline; b != nil && (b.Duration < 0 || b.Duration > MaxThroughputBaseline) {
		errs = append(errs, field.Invalid(path.Child("baseline"), b.String(), fmt.Sprintf("must be 0s (none) to %s", MaxThroughputBaseline)))
	}
	for _, h := range p.sources() {
		errs = append(errs, v.CheckHost(h, path.Child("from"))...)
	}
	return errs
}

// Measure creates (once) the Service and loads it, each kind in turn.
func (p *ThroughputParams) Measure(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	t := synth.Template{EndpointsPerService: p.Endpoints, Type: corev1.ServiceTypeNodePort}
	labels := s.Labels()
	if err := s.applySynthService(ctx, throughputIndex, t); err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	from := p.sources()
	if from == nil {
		from = []string{s.Cluster.ProbeHost(lab.NodeName(0))}
	}
	var sources []measure.ThroughputSource
	for _, f := range from {
		h, err := resolveHost(s.Cluster, f)
		if err != nil {
			return nil, fmt.Errorf("throughput: params.from: %w", err)
		}
		target := Destination{Service: synth.Namespace + "/" + synth.Name(throughputIndex)}
		if h.Kind == lab.KindClient {
			target.Address = AddressNodePort
		}
		ap, _, err := resolveDestination(s.Cluster, target)
		if err != nil {
			return nil, fmt.Errorf("throughput: %w", err)
		}
		sources = append(sources, measure.ThroughputSource{Host: h.Name, NSPath: h.NetNSPath, Destination: probe.Destination{Addr: ap, Protocol: lab.TCP}})
	}
	labels["endpoints"] = strconv.Itoa(p.Endpoints)
	modes := []probe.LoadMode{probe.LoadMode(p.Kind)}
	if p.Kind == ThroughputBoth {
		modes = []probe.LoadMode{probe.LoadConnections, probe.LoadRequests}
	}
	var out []reports.Measurement
	for i, mode := range modes {
		ms, err := measure.Throughput(ctx, sources, measure.ThroughputOptions{Mode: mode, Workers: p.Workers, Duration: p.Duration.Duration,
			MaxOps: p.MaxOps, Baseline: p.Baseline.Duration}, labels)
		out = append(out, ms...)
		if err != nil {
			return out, err
		}
		if len(ms) > 0 {
			x := ms[0].Extra
			s.Logf("throughput %s, %s services: %.0f/s (%.0f ok, %.0f errors), %.2f cores busy",
				mode, labels["services"], x["rate"], x["ops"], x["errors"], x["cpu_busy_cores"])
		}
		s.Advance(i+1, len(modes))
	}
	return out, nil
}
