package reports

// The throughput family: operations per second through a Service under load.
const (
	// MeasureThroughput is connections per second through a Service, as kpbench recorded
	// it before it told new connections from kept-alive requests; Params "services".
	// Unit "1/s". Read in older files only.
	MeasureThroughput = "throughput"
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

// throughputMeasures declares the throughput family.
func throughputMeasures() []Measure {
	rate := func(name, title string) Metric {
		return Metric{Measurement: name, Title: title, Unit: UnitPerSecond, Better: HigherIsBetter,
			Gated: true, Test: TestLocation, MinSamples: 10, Statistics: []string{"p50"}}
	}
	const note = "Median rate of the 100-ms slices of the load; bar: min to max slice. Higher is better. Load generator, echo servers and datapath share this machine's cores."
	chart := func(name, title, y string) chartFunc {
		return sizeChart{measurement: name, unit: UnitPerSecond, file: name, title: title, y: y, note: fixedNote(note)}.draw
	}
	// One row for new connections: the newer name where a run has it, else the older.
	newConnections := question{Title: "new connections per second", Stat: "p50"}
	return []Measure{
		{
			Name:      MeasureThroughputConnections,
			Metrics:   []Metric{rate(MeasureThroughputConnections, "new connections per second")},
			Legacy:    []Metric{rate(MeasureThroughputConnections, "new connections per second")},
			questions: []question{newConnections},
			charts:    []chartFunc{chart(MeasureThroughputConnections, "New connections per second through a Service, by Services in the table", "new connections per second")},
		},
		{
			Name:    MeasureThroughputRequests,
			Metrics: []Metric{rate(MeasureThroughputRequests, "kept-alive requests per second")},
			Legacy:  []Metric{rate(MeasureThroughputRequests, "kept-alive requests per second")},
			charts:  []chartFunc{chart(MeasureThroughputRequests, "Keep-alive requests per second through a Service, by Services in the table", "requests per second")},
		},
		{
			Name:      MeasureThroughput,
			Legacy:    []Metric{rate(MeasureThroughput, "throughput")},
			questions: []question{newConnections},
			charts:    []chartFunc{chart(MeasureThroughput, "Throughput through a Service, by Services in the table", "connections per second")},
		},
		{
			Name:    MeasureThroughputLatency,
			Metrics: []Metric{{Measurement: MeasureThroughputLatency, Title: "latency under load", Unit: UnitSeconds, Better: LowerIsBetter}},
		},
	}
}
