//go:build linux

package measure

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
)

const (
	// maxLatencySamples bounds the raw latencies kept per throughput measurement (an even
	// stride through all of them), so results.json and bench.txt stay small.
	maxLatencySamples = 1000
)

// ThroughputSource is one lab host that sends load, and where it sends it.
type ThroughputSource struct {
	// Host is the lab host's name (client-0, probe-node-0, ...), for labels and errors.
	Host string
	// NSPath is the host's network namespace.
	NSPath string
	// Destination is the Service address this host uses: the ClusterIP from pods and
	// nodes, a node port from external clients.
	Destination probe.Destination
}

// ThroughputOptions shape a throughput measurement. Zero values take probe.Load's
// defaults.
type ThroughputOptions struct {
	// Mode is probe.LoadConnections (new connections per second) or probe.LoadRequests
	// (requests per second over kept-alive connections).
	Mode probe.LoadMode
	// Workers is the number of concurrent workers per source host.
	Workers int
	// Duration is the length of the load window.
	Duration time.Duration
	// MaxOps bounds the operations per source host.
	MaxOps int
	// Baseline is the length of an idle window measured just before the load, whose CPU
	// use per second is subtracted from the load's (0: no baseline).
	Baseline time.Duration
}

// CPUTimes are the machine's CPU times from the first line of /proc/stat, in seconds
// summed over every CPU. /proc/stat is not namespaced: it is the whole machine, the load
// generator, the echo servers, kpbench itself (and the userspace proxy) and whatever else
// runs on it included.
type CPUTimes struct {
	// User includes nice; System is kernel time outside interrupts; SoftIRQ is where the
	// kernel datapath (netfilter, conntrack, NAT, veth and bridge forwarding) mostly runs;
	// IRQ is hard interrupts; Idle includes iowait; Steal is time taken by the hypervisor.
	User, System, IRQ, SoftIRQ, Idle, Steal float64
}

// Busy returns every non-idle second.
func (c CPUTimes) Busy() float64 { return c.User + c.System + c.IRQ + c.SoftIRQ + c.Steal }

// Sub returns c - o.
func (c CPUTimes) Sub(o CPUTimes) CPUTimes {
	return CPUTimes{User: c.User - o.User, System: c.System - o.System, IRQ: c.IRQ - o.IRQ,
		SoftIRQ: c.SoftIRQ - o.SoftIRQ, Idle: c.Idle - o.Idle, Steal: c.Steal - o.Steal}
}

// Scale returns c times f.
func (c CPUTimes) Scale(f float64) CPUTimes {
	return CPUTimes{User: c.User * f, System: c.System * f, IRQ: c.IRQ * f, SoftIRQ: c.SoftIRQ * f, Idle: c.Idle * f, Steal: c.Steal * f}
}

// userHZ is the unit of /proc/stat (USER_HZ, 100 on every Linux architecture kpbench runs
// on).
const userHZ = 100

// ReadCPUTimes reads the machine's CPU times.
//
// Equivalent to: `head -1 /proc/stat`.
func ReadCPUTimes() (CPUTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, fmt.Errorf("cpu times: %w", err)
	}
	return ParseCPUTimes(string(data))
}

// ParseCPUTimes parses the aggregate "cpu" line of /proc/stat:
// user nice system idle iowait irq softirq steal [guest guest_nice] (guest time is already
// part of user).
func ParseCPUTimes(stat string) (CPUTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("/proc/stat:1: want \"cpu user nice system idle iowait irq softirq steal\", got %q", line)
	}
	v := make([]float64, 8)
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat:1: field %d: %w", i+1, err)
		}
		v[i] = float64(n) / userHZ
	}
	return CPUTimes{User: v[0] + v[1], System: v[2], Idle: v[3] + v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
}

// processCPU returns this process's user and system CPU seconds.
func processCPU() (user, sys float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime), tv(ru.Stime)
}

// ThroughputName returns the measurement name of a load mode:
// reports.MeasureThroughputRequests for requests, else MeasureThroughputConnections.
func ThroughputName(mode probe.LoadMode) string {
	if mode == probe.LoadRequests {
		return reports.MeasureThroughputRequests
	}
	return reports.MeasureThroughputConnections
}

// Throughput loads a Service from every source at once (probe.Load, opts.Workers workers
// each) for opts.Duration, and returns two measurements:
//
//   - throughput-connections or throughput-requests (unit 1/s): one sample per 100-ms
//     slice of the window, the operations completed in it by all sources together, as a
//     rate, so that compare's Mann-Whitney test has samples. Extra holds the totals (ops,
//     errors and their classes, the overall rate, elapsed seconds, endpoints that
//     answered), latency percentiles, and the CPU the machine spent during the window:
//     user, system and softirq seconds (from /proc/stat: the whole machine, not just the
//     node's namespace; with opts.Baseline, also the same figures net of an idle window
//     measured just before, scaled to the window's length), busy cores, CPU seconds per
//     1000 operations, and this process's own user and system CPU (load generator, echo
//     servers and the userspace proxy all live in it);
//   - throughput-latency (unit s, Params "kind" the mode): the latency of successful
//     operations, at most 1000 samples taken at an even stride.
//
// A load where no operation succeeded is an error, as is one where more than a tenth of
// them failed; the measurement is still returned with the error, so that the failure is
// visible in the results.
func Throughput(ctx context.Context, sources []ThroughputSource, opts ThroughputOptions, extra map[string]string) ([]Measurement, error) {
	if len(sources) == 0 {
		return nil, fmt.Errorf("throughput: no source host")
	}
	var baseline CPUTimes
	var baseSecs float64
	if opts.Baseline > 0 {
		b0, err := ReadCPUTimes()
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		timer := time.NewTimer(opts.Baseline)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
		b1, err := ReadCPUTimes()
		if err != nil {
			return nil, err
		}
		baseline, baseSecs = b1.Sub(b0), time.Since(t0).Seconds()
	}
	c0, err := ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	pu0, ps0 := processCPU()
	start := time.Now()
	results := make([]probe.LoadResult, len(sources))
	errs := make([]error, len(sources))
	var wg sync.WaitGroup
	for i, s := range sources {
		wg.Go(func() {
			results[i], errs[i] = probe.Load(ctx, s.NSPath, probe.LoadSpec{Destination: s.Destination, Mode: opts.Mode,
				Workers: opts.Workers, Duration: opts.Duration, MaxOps: opts.MaxOps})
		})
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	c1, err := ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	pu1, ps1 := processCPU()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("throughput from %s to %s: %w", sources[i].Host, sources[i].Destination, err)
		}
	}

	name := ThroughputName(opts.Mode)
	p := params("kind", string(opts.Mode))
	hosts := make([]string, len(sources))
	for i, s := range sources {
		hosts[i] = s.Host
	}
	p["from"] = strings.Join(hosts, ",")
	for k, v := range extra {
		p[k] = v
	}
	m := Measurement{Name: name, Params: clone(p), Unit: reports.UnitPerSecond, Extra: map[string]float64{}}
	var (
		slice    time.Duration
		sliceSum []int
		ops      int
		errCount int
		elapsed  time.Duration
		lat      []time.Duration
		pods     = map[string]int{}
		classes  = map[probe.ErrClass]int{}
		firstErr error
		workers  int
	)
	for i, r := range results {
		slice = r.Slice
		for k, n := range r.Slices {
			if k >= len(sliceSum) {
				sliceSum = append(sliceSum, make([]int, k+1-len(sliceSum))...)
			}
			sliceSum[k] += n
		}
		ops += r.Ops
		errCount += r.Errors
		elapsed = max(elapsed, r.Elapsed)
		lat = append(lat, r.Latencies...)
		for pod, n := range r.Pods {
			pods[pod] += n
		}
		for c, n := range r.Classes {
			classes[c] += n
		}
		if firstErr == nil {
			firstErr = r.FirstErr
		}
		workers += r.Workers
		m.Extra["ops_"+sources[i].Host] = float64(r.Ops)
		m.Extra["rate_"+sources[i].Host] = r.Rate()
	}
	all := probe.LoadResult{Ops: ops, Errors: errCount, Elapsed: elapsed, Slices: sliceSum, Slice: slice, Latencies: lat}
	m.Samples = all.SliceRates()
	m.Extra["ops"] = float64(ops)
	m.Extra["errors"] = float64(errCount)
	for c, n := range classes {
		m.Extra["errors_"+c.String()] = float64(n)
	}
	m.Extra["rate"] = all.Rate()
	m.Extra["elapsed_seconds"] = elapsed.Seconds()
	m.Extra["workers"] = float64(workers)
	m.Extra["endpoints_answered"] = float64(len(pods))
	for _, q := range []float64{50, 90, 99} {
		m.Extra["latency_p"+strconv.Itoa(int(q))+"_seconds"] = all.Percentile(q).Seconds()
	}

	cpu := c1.Sub(c0)
	m.Extra["cpu_user_seconds"] = cpu.User
	m.Extra["cpu_system_seconds"] = cpu.System
	m.Extra["cpu_softirq_seconds"] = cpu.SoftIRQ
	m.Extra["cpu_busy_cores"] = cpu.Busy() / wall
	if ops > 0 {
		m.Extra["cpu_seconds_per_1k_ops"] = cpu.Busy() / float64(ops) * 1000
	}
	if baseSecs > 0 {
		base := baseline.Scale(wall / baseSecs)
		net := cpu.Sub(base)
		m.Extra["cpu_baseline_busy_cores"] = baseline.Busy() / baseSecs
		m.Extra["cpu_net_user_seconds"] = net.User
		m.Extra["cpu_net_system_seconds"] = net.System
		m.Extra["cpu_net_softirq_seconds"] = net.SoftIRQ
		if ops > 0 {
			m.Extra["cpu_net_seconds_per_1k_ops"] = net.Busy() / float64(ops) * 1000
		}
	}
	m.Extra["process_cpu_user_seconds"] = pu1 - pu0
	m.Extra["process_cpu_system_seconds"] = ps1 - ps0

	lp := clone(p)
	lm := Measurement{Name: reports.MeasureThroughputLatency, Params: lp, Unit: reports.UnitSeconds, Samples: stride(lat, maxLatencySamples)}
	out := []Measurement{m}
	if len(lm.Samples) > 0 {
		out = append(out, lm)
	}
	total := ops + errCount
	switch {
	case ops == 0:
		return out, fmt.Errorf("throughput %s from %s: no operation succeeded (%d failed, first: %v)", opts.Mode, p["from"], errCount, firstErr)
	case errCount*10 > total:
		return out, fmt.Errorf("throughput %s from %s: %d of %d operations failed (first: %v)", opts.Mode, p["from"], errCount, total, firstErr)
	}
	return out, nil
}

// stride returns at most n of ds in seconds, taken at an even stride (all of them when
// there are fewer).
func stride(ds []time.Duration, n int) []float64 {
	if len(ds) == 0 {
		return nil
	}
	step := max(1, (len(ds)+n-1)/n)
	out := make([]float64, 0, min(n, len(ds)))
	for i := 0; i < len(ds) && len(out) < n; i += step {
		out = append(out, ds[i].Seconds())
	}
	return out
}

// clone copies a parameter map.
func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
