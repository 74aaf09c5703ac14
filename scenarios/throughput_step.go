//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/scenarios/measure"
	"kpbench.dev/kpbench/scenarios/synth"
	"kpbench.dev/kpbench/testbed"
)

// throughputIndex names the throughput measurement's Service: it sorts after every ladder
// service (and before the distribution measurement's).
const throughputIndex = 999998

// throughput runs the `throughput` measurement: a NodePort Service over `endpoints`
// (default 10) of the synthetic pods is created once, then loaded from every host of
// params.from (comma-separated; default the probe pod of node 0) at once: pods and nodes
// use the ClusterIP, external clients node 0's node port. params.kind is connections,
// requests or both (default); workers (per host, default 8), duration (default 3s),
// maxOps (per host, default 1,000,000) and baseline (the idle window whose CPU use is
// subtracted, default 500ms, "0s" for none) shape the load. Its measurements are added
// to the run even when the load failed, so that the failure shows in the results.
func (r *backendRun) throughput(ctx context.Context, m *MeasureStep, labels map[string]string) error {
	param := func(key, def string) string {
		if v, ok := m.Params[key]; ok {
			return fmt.Sprint(v)
		}
		return def
	}
	intParam := func(key string, def int) (int, error) {
		v, err := strconv.Atoi(param(key, strconv.Itoa(def)))
		if err != nil || v < 1 {
			return 0, fmt.Errorf("measure throughput: params.%s: want a positive integer, got %q", key, param(key, ""))
		}
		return v, nil
	}
	durParam := func(key string, def time.Duration) (time.Duration, error) {
		d, err := time.ParseDuration(param(key, def.String()))
		if err != nil || d < 0 {
			return 0, fmt.Errorf("measure throughput: params.%s: want a duration such as \"3s\", got %q", key, param(key, ""))
		}
		return d, nil
	}
	n, err := intParam("endpoints", 10)
	if err != nil {
		return err
	}
	workers, err := intParam("workers", probe.DefaultLoadWorkers)
	if err != nil {
		return err
	}
	maxOps, err := intParam("maxOps", probe.DefaultLoadMaxOps)
	if err != nil {
		return err
	}
	duration, err := durParam("duration", probe.DefaultLoadDuration)
	if err != nil {
		return err
	}
	baseline, err := durParam("baseline", 500*time.Millisecond)
	if err != nil {
		return err
	}
	var modes []probe.LoadMode
	switch k := param("kind", "both"); k {
	case "both":
		modes = []probe.LoadMode{probe.LoadConnections, probe.LoadRequests}
	case string(probe.LoadConnections), string(probe.LoadRequests):
		modes = []probe.LoadMode{probe.LoadMode(k)}
	default:
		return fmt.Errorf("measure throughput: params.kind: want connections, requests or both, got %q", k)
	}

	if err := r.ensureSynthPods(ctx); err != nil {
		return err
	}
	if n > len(r.synthPods) {
		return fmt.Errorf("measure throughput: at most %d endpoints", len(r.synthPods))
	}
	t := synth.Template{EndpointsPerService: n, Type: corev1.ServiceTypeNodePort}
	if err := r.tb.Apply(ctx, synth.Service(throughputIndex, t), synth.Slice(throughputIndex, 0, t, r.synthPods)); err != nil {
		return err
	}
	if err := r.tb.WaitSynced(ctx); err != nil {
		return err
	}
	var sources []measure.ThroughputSource
	for _, from := range strings.Split(param("from", testbed.ProbePod(lab.NodeName(0))), ",") {
		h, err := r.resolveHost(strings.TrimSpace(from))
		if err != nil {
			return fmt.Errorf("measure throughput: params.from: %w", err)
		}
		target := Target{Service: synth.Namespace + "/" + synth.Name(throughputIndex)}
		if h.Kind == lab.KindClient {
			target.Address = AddressNodePort
		}
		ap, _, err := r.resolveTarget(target)
		if err != nil {
			return fmt.Errorf("measure throughput: %w", err)
		}
		sources = append(sources, measure.ThroughputSource{Host: h.Name, NSPath: h.NetNSPath, Target: probe.Target{Addr: ap, Protocol: lab.TCP}})
	}
	labels = clone(labels)
	labels["endpoints"] = strconv.Itoa(n)
	for _, mode := range modes {
		ms, err := measure.Throughput(ctx, sources, measure.ThroughputOptions{Mode: mode, Workers: workers, Duration: duration,
			MaxOps: maxOps, Baseline: baseline}, labels)
		for _, mm := range ms {
			r.res.Add(r.backend, mm)
		}
		if err != nil {
			return err
		}
		if len(ms) > 0 {
			x := ms[0].Extra
			r.logf("throughput %s, %s services: %.0f/s (%.0f ok, %.0f errors), %.2f cores busy",
				mode, labels["services"], x["rate"], x["ops"], x["errors"], x["cpu_busy_cores"])
		}
	}
	return nil
}
