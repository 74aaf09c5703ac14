//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/scenarios/synth"
)

// programmingIndex is the generated Service that probed programming latency moves: a
// name that sorts after every ladder Service and before the other measurements' own.
const programmingIndex = 999997

// HalfAPIToProbe labels probed programming latency: from the API's acknowledgement of
// an endpoint change to the first probe from a node answered by the new endpoint.
const HalfAPIToProbe = reports.ProgrammingHalfAPIToProbe

// programmingPollInterval is the pause between two probes of one node while it waits
// for a change: the figure's resolution beside the probe's own round trip.
const programmingPollInterval = 10 * time.Millisecond

// measureProbed makes p.Samples endpoint changes of a one-endpoint Service of its own,
// each moving it to the next generated pod, and times each per node: from the moment the
// API acknowledged the new EndpointSlice to the end of the first probe from the node's
// probe host that the new pod answered. The figure is what a client on that node sees:
// the watch, the proxy's sync and the kernel, plus up to one poll interval and one probe
// round trip (on a real cluster a probe is a /dial through the API server, ~20 ms here).
func (p *ProgrammingLatencyParams) measureProbed(ctx context.Context, s *Session) ([]reports.Measurement, error) {
	tmpl := synth.Template{EndpointsPerService: 1}
	if err := s.applySynthService(ctx, programmingIndex, tmpl); err != nil {
		return nil, fmt.Errorf("programming-latency: its Service: %w", err)
	}
	target, _, err := resolveDestination(s.Cluster, Destination{Service: synth.Namespace + "/" + synth.Name(programmingIndex)})
	if err != nil {
		return nil, fmt.Errorf("programming-latency: %w", err)
	}
	nodes := s.Cluster.Hosts(lab.KindNode)
	probers := make([]cluster.Prober, len(nodes))
	for i, n := range nodes {
		if probers[i], err = s.Cluster.Prober(s.Cluster.ProbeHost(n.Name)); err != nil {
			return nil, fmt.Errorf("programming-latency: prober of %s: %w", n.Name, err)
		}
	}
	perNode := make([][]float64, len(nodes))
	for g := 1; g <= p.Samples; g++ {
		slice := synth.Slice(programmingIndex, g, tmpl, s.synth.pods)
		want := s.synthPodName(slice.Endpoints[0].Addresses[0])
		if err := s.Cluster.Apply(ctx, slice); err != nil {
			return nil, fmt.Errorf("programming-latency: change %d: %w", g, err)
		}
		acked := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(nodes))
		for i := range nodes {
			wg.Go(func() {
				d, err := firstAnswerFrom(ctx, probers[i], probe.Destination{Addr: target, Protocol: lab.TCP}, want, acked, p.Timeout.Duration)
				if err != nil {
					errs[i] = fmt.Errorf("programming-latency: change %d on %s: %w", g, nodes[i].Name, err)
					return
				}
				perNode[i] = append(perNode[i], d.Seconds())
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		s.Advance(g, p.Samples)
	}
	out := make([]reports.Measurement, 0, len(nodes))
	for i, n := range nodes {
		params := map[string]string{"half": HalfAPIToProbe, "node": n.Name}
		maps.Copy(params, s.Labels())
		out = append(out, reports.Measurement{Name: reports.MeasureProgrammingLatency, Params: params, Unit: reports.UnitSeconds, Samples: perNode[i]})
	}
	return out, nil
}

// firstAnswerFrom probes target every programmingPollInterval until pod answers, and
// returns the time from since to the end of that probe; it gives up after timeout.
func firstAnswerFrom(ctx context.Context, pr cluster.Prober, target probe.Destination, pod string, since time.Time, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(programmingPollInterval)
	defer tick.Stop()
	last := "no probe sent"
	for {
		res := pr.Request(ctx, target, probe.Options{Timeout: time.Second})
		if res.Err == nil && res.Answer.Pod == pod {
			return time.Since(since), nil
		}
		if res.Err != nil {
			last = res.Err.Error()
		} else {
			last = "answered by " + res.Answer.Pod
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s never answered within %s (last probe: %s)", pod, timeout, last)
		case <-tick.C:
		}
	}
}

// synthPodName names the generated pod at ip, as ensureSynthPods recorded it.
func (s *Session) synthPodName(ip string) string {
	for _, b := range s.synth.pods {
		if b.IP.String() == ip {
			return b.Pod
		}
	}
	return ""
}
