//go:build linux

// Package measure holds the bench's named measurements. Each takes what it needs of a
// cluster under test (its proxies, a prober of one of its hosts) and returns measurements with raw samples (summaries are derived by the reports package):
//
//   - sync: full and partial sync wall time, with generate/apply split, tool CPU time,
//     bytes and rules written;
//   - lookup: first-packet (TCP connect) latency to services at the first, middle and last
//     position of the rule order, with established-connection latency as the control;
//   - distribution: new connections to one service, counted per endpoint, with a
//     chi-square goodness-of-fit test against the expected shares;
//   - rules: rules or objects in the kernel after a sync, and kernel slab memory;
//   - programming-latency: from a change's trigger time to the end of the sync that
//     carried it, as kube-proxy measures it.
package measure

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/cluster"
	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports"
	"kpbench.dev/kpbench/reports/stats"
)

// Measurement is one named series of raw samples with its parameters.
type Measurement = reports.Measurement

func params(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// Sync times `repeats` syncs of a node's proxy, full or partial. A partial sync is made
// by changing one service (change is called before each repeat, must change exactly one
// service, and wait until the change is programmed); a full sync rewrites everything on
// the current state.
//
// control, when not nil, is the machine control: it is called twice around every timed
// sync (just before and just after it), and the sum of its two durations is sample i of
// the control measurement (kind "full-control" or "partial-control", marked
// reports.ExtraInterleaved), so that compare can judge each sync against the machine it ran on.
func Sync(ctx context.Context, ag cluster.Proxy, full bool, repeats int, change func(ctx context.Context, i int) error, control func() time.Duration, extra map[string]string) ([]Measurement, error) {
	var total, gen, apply, cpu, ctl []time.Duration
	var bytes, rules, changed []float64
	var unplanned []agent.SyncRecord
	for i := range repeats {
		var rec agent.SyncRecord
		var before time.Duration
		if control != nil {
			before = control()
		}
		if full {
			r, err := ag.ForceSync(ctx, true)
			if err != nil {
				return nil, err
			}
			if !r.Result.Full {
				return nil, fmt.Errorf("sync: the proxy of %s was asked for a full sync and did a partial one", ag.Node())
			}
			rec = r
		} else {
			r, skipped, err := partialSync(ctx, ag, i, change)
			unplanned = append(unplanned, skipped...)
			if err != nil {
				return nil, err
			}
			rec = r
		}
		if control != nil {
			ctl = append(ctl, before+control())
		}
		total = append(total, rec.Duration())
		gen = append(gen, rec.Result.Generate+rec.View)
		apply = append(apply, rec.Result.Apply)
		if rec.Result.ApplyCPU > 0 {
			cpu = append(cpu, rec.Result.ApplyCPU)
		}
		bytes = append(bytes, float64(rec.Result.Bytes))
		rules = append(rules, float64(rec.Result.Rules))
		changed = append(changed, float64(rec.Result.ChangedServices))
	}
	kind := "partial"
	if full {
		kind = "full"
	}
	mk := func(name, unit string, samples []float64) Measurement {
		p := params("kind", kind)
		for k, v := range extra {
			p[k] = v
		}
		return Measurement{Name: name, Params: p, Unit: unit, Samples: samples}
	}
	out := []Measurement{
		mk(reports.MeasureSync, "s", seconds(total)),
		mk(reports.MeasureSyncGenerate, "s", seconds(gen)),
		mk(reports.MeasureSyncApply, "s", seconds(apply)),
	}
	// The tool's CPU time is measured only by backends that exec a tool: absent, not 0,
	// for the others.
	if len(cpu) == len(total) {
		out = append(out, mk(reports.MeasureSyncApplyCPU, "s", seconds(cpu)))
	}
	if len(ctl) == len(total) && len(ctl) > 0 {
		c := mk(reports.MeasureSync, "s", seconds(ctl))
		c.Params["kind"] = kind + "-control"
		c.Extra = map[string]float64{reports.ExtraInterleaved: 1}
		out = append(out, c)
	}
	// Full syncs that came where a partial one was timed are kept apart, with their
	// durations: a partial sample is always a partial sync, never merely the first sync
	// after the change, whatever its kind.
	if len(unplanned) > 0 {
		d := make([]time.Duration, len(unplanned))
		for j, r := range unplanned {
			d[j] = r.Duration()
		}
		out = append(out, mk(reports.MeasureSyncUnplannedFull, "s", seconds(d)))
	}
	return append(out,
		mk(reports.MeasureSyncBytes, "bytes", bytes),
		mk(reports.MeasureSyncRules, "count", rules),
		mk(reports.MeasureSyncChangedServices, "count", changed),
	), nil
}

// MachineWork is the sync's machine control: a fixed amount of CPU and memory work
// (SHA-256 over 4 MiB, a few milliseconds on an idle core), timed. It is the same work in
// every run and every version of kpbench and of the proxy, so that its time measures
// only the machine: how much CPU this process gets and how fast, around the sync it
// brackets. It does not see what a sync spends in the kernel or waiting on a lock, so it
// explains drift to first order only.
func MachineWork() time.Duration {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	h := sha256.New()
	for range 64 {
		h.Write(buf)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return time.Since(start)
}

// maxUnplannedFull bounds the full syncs a partial-sync sample may meet before the
// measurement gives up: one is chance (a periodic resync, a lost canary), three in a row
// mean the proxy cannot sync partially here.
const maxUnplannedFull = 3

// partialSync makes one change and returns the partial sync that programmed it. A full
// sync that comes instead (the proxy's own decision: a failed state check, a periodic
// resync, a failure before) is returned in skipped, never as the partial sample, and the
// change is made again.
func partialSync(ctx context.Context, ag cluster.Proxy, i int, change func(ctx context.Context, i int) error) (rec agent.SyncRecord, skipped []agent.SyncRecord, err error) {
	for range maxUnplannedFull + 1 {
		before := len(ag.Records())
		if err := change(ctx, i); err != nil {
			return rec, skipped, err
		}
		recs := ag.Records()[before:]
		if len(recs) == 0 {
			return rec, skipped, fmt.Errorf("sync: the change made no sync")
		}
		var full []agent.SyncRecord
		for _, r := range recs {
			if r.Err != nil {
				return rec, skipped, r.Err
			}
			if !r.Result.Full {
				return r, append(skipped, full...), nil
			}
			full = append(full, r)
		}
		skipped = append(skipped, full...)
	}
	why := "no cause recorded"
	if last := skipped[len(skipped)-1]; last.Result.FullReason != "" {
		why = last.Result.FullReason
	} else if last.StateLost != nil {
		why = "state check failed: " + last.StateLost.Error()
	} else if last.Periodic {
		why = "periodic resync"
	}
	return rec, skipped, fmt.Errorf("sync: the proxy of %s did %d full syncs in a row where a partial one was timed (%s)", ag.Node(), len(skipped), why)
}

// Lookup times TCP connects from a host to each target (a position name → address),
// samples rounds of one connect per position, and the established-connection control:
// one request over a connection kept open to the last target, taken in every round right
// after its connects, so that the control sees the same machine the connects saw. A
// round where a connect fails is dropped whole (every position and the control keep the
// same count, sample i of each from round i); more than samples/10+3 failures fail the
// measurement. A prober without kept connections (a real cluster's) measures no control.
func Lookup(ctx context.Context, pr cluster.Prober, from string, targets map[string]netip.AddrPort, samples int, extra map[string]string) ([]Measurement, error) {
	positions := make([]string, 0, len(targets))
	for p := range targets {
		positions = append(positions, p)
	}
	slices.Sort(positions)
	last := targets[positions[len(positions)-1]]
	conn, err := pr.Dial(ctx, probe.Destination{Addr: last, Protocol: lab.TCP}, probe.Options{Timeout: 2 * time.Second})
	switch {
	case errors.Is(err, cluster.ErrNotAvailable):
		conn = nil // no kept connection from this prober: no control
	case err != nil:
		return nil, fmt.Errorf("lookup: established control to %s: %w", last, err)
	default:
		defer conn.Close()
	}
	connect := map[string][]float64{}
	var est []float64
	var failures int
	round := make(map[string]float64, len(positions))
	// Bounded: a round either adds a sample to every position or counts a failure, and
	// failures past samples/10+3 end the measurement.
	for len(connect[positions[0]]) < samples {
		clear(round)
		ok := true
		for _, pos := range positions {
			res := pr.Connect(ctx, probe.Destination{Addr: targets[pos], Protocol: lab.TCP}, probe.Options{Timeout: 2 * time.Second})
			if res.Err != nil {
				failures++
				if failures > samples/10+3 {
					return nil, fmt.Errorf("lookup: connect to %s (%s) from %s: %w", targets[pos], pos, from, res.Err)
				}
				ok = false
				break
			}
			round[pos] = res.Connect.Seconds()
		}
		if !ok {
			continue
		}
		if conn != nil {
			res := conn.Request(ctx)
			if res.Err != nil {
				return nil, fmt.Errorf("lookup: request over established connection: %w", res.Err)
			}
			est = append(est, res.Total.Seconds())
		}
		for _, pos := range positions {
			connect[pos] = append(connect[pos], round[pos])
		}
	}
	var out []Measurement
	for _, pos := range positions {
		p := params("position", pos, "kind", "connect")
		for k, v := range extra {
			p[k] = v
		}
		out = append(out, Measurement{Name: reports.MeasureLookup, Params: p, Unit: "s", Samples: connect[pos]})
	}
	if conn == nil {
		return out, nil
	}
	p := params("position", "established", "kind", "established")
	for k, v := range extra {
		p[k] = v
	}
	return append(out, Measurement{Name: reports.MeasureLookup, Params: p, Unit: "s", Samples: est, Extra: map[string]float64{reports.ExtraInterleaved: 1}}), nil
}

// Distribution opens n new connections from host to target and counts the answering pods
// among the expected ones; the measurement's samples are the counts per endpoint (in the
// order of expected), with the chi-square statistic, degrees of freedom and p-value
// against shares (uniform when nil) in Extra.
func Distribution(ctx context.Context, pr cluster.Prober, target netip.AddrPort, proto lab.Protocol, expected []string, shares []float64, n int, extra map[string]string) (Measurement, error) {
	index := map[string]int{}
	for i, pod := range expected {
		index[pod] = i
	}
	counts := make([]int, len(expected))
	var failed, strays int
	for range n {
		res := pr.Request(ctx, probe.Destination{Addr: target, Protocol: proto}, probe.Options{Timeout: 2 * time.Second})
		if res.Err != nil {
			failed++
			continue
		}
		i, ok := index[res.Answer.Pod]
		if !ok {
			strays++
			continue
		}
		counts[i]++
	}
	if shares == nil {
		shares = stats.Uniform(len(expected))
	}
	m := Measurement{Name: reports.MeasureDistribution, Params: params("endpoints", strconv.Itoa(len(expected))), Unit: "count", Extra: map[string]float64{
		"failed": float64(failed), "unexpected": float64(strays), "connections": float64(n),
	}}
	for k, v := range extra {
		m.Params[k] = v
	}
	for i, c := range counts {
		m.Samples = append(m.Samples, float64(c))
		m.Extra["share_"+strconv.Itoa(i)] = shares[i]
	}
	if chi2, df, p, err := stats.ChiSquareGOF(counts, shares); err == nil {
		m.Extra["chi2"], m.Extra["df"], m.Extra["p_value"] = chi2, float64(df), p
	}
	return m, nil
}

// ProgrammingLatency returns the network programming latencies of every proxy so far.
func ProgrammingLatency(proxies []cluster.Proxy, extra map[string]string) Measurement {
	var all []time.Duration
	for _, ag := range proxies {
		all = append(all, ag.Metrics().NetworkProgramming...)
	}
	p := params()
	for k, v := range extra {
		p[k] = v
	}
	return Measurement{Name: reports.MeasureProgrammingLatency, Params: p, Unit: "s", Samples: seconds(all)}
}
