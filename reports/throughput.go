package reports

import (
	"fmt"

	"gonum.org/v1/plot"
)

// Throughput measurement names (scenarios/measure.Throughput writes them).
const (
	// MeasureThroughputConnections is new TCP connections per second through a Service
	// (connect, one request, answer, close), from every source host together. Samples are
	// the rates of 100-ms slices of the load window; Params "kind" is "connections",
	// "from" the source hosts, "endpoints" the Service's endpoints, "services" the table
	// size; Extra holds ops, errors (and errors_<class>), rate (over the whole window),
	// latency_p50/p90/p99_seconds, the machine's CPU during the window from /proc/stat
	// (cpu_user/system/softirq_seconds, cpu_busy_cores, cpu_seconds_per_1k_ops, and the
	// cpu_net_* figures net of an idle baseline when one was measured) and kpbench's own
	// CPU (process_cpu_user/system_seconds). Unit "1/s".
	MeasureThroughputConnections = "throughput-connections"
	// MeasureThroughputRequests is the same for requests over kept-alive connections
	// (one per worker); Params "kind" is "requests". Unit "1/s".
	MeasureThroughputRequests = "throughput-requests"
	// MeasureThroughputLatency is the latency of the successful operations of a
	// throughput load (at most 1000 samples at an even stride); Params "kind" tells which
	// load. Unit "s".
	MeasureThroughputLatency = "throughput-latency"
)

// throughput draws rate against Services, one line per backend (median of the 100-ms
// slice rates, bars: 95% CI), one figure per kind: new connections and keep-alive
// requests (and the older single "throughput" measurement when a run has it).
func (d *drawer) throughput() ([]Figure, error) {
	kinds := []struct{ name, file, title, y string }{
		{MeasureThroughputConnections, "throughput-connections", "New connections per second vs Services", "new connections per second"},
		{MeasureThroughputRequests, "throughput-requests", "Keep-alive requests per second vs Services", "requests per second (kept-alive connections)"},
		{MeasureThroughput, "throughput", "Throughput vs Services", "throughput (connections per second)"},
	}
	var figs []Figure
	for _, k := range kinds {
		all, labels, owners := d.bySize(k.name, true, func(pt point) (string, bool) {
			return pt.backend, true
		})
		if len(labels) == 0 {
			continue
		}
		p := newPlot(k.title+" (median of 100-ms slices, bars: 95% CI)", "Services (log scale)", k.y)
		p.Legend.Left = false
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = sizeTicks(all)
		p.Y.Min = 0
		for i, l := range labels {
			if err := d.add(p, *all[l], owners[i], 0); err != nil {
				return nil, fmt.Errorf("plot %s: %w", k.file, err)
			}
		}
		p.Y.Tick.Marker = numberTicks{UnitPerSecond}
		roomForLegend(p, len(labels), false)
		figs = append(figs, Figure{Name: k.file, Title: k.title, Plot: p})
	}
	return figs, nil
}
