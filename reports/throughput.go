package reports

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
