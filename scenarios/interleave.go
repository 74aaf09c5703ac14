//go:build linux

package scenarios

import (
	"maps"
	"slices"
	"strconv"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/reports"
)

// DefaultABRounds is the number of rounds of an A/B run (two variants of one proxy mode)
// when none is asked for: enough to see drift of the machine in both orders.
const DefaultABRounds = 3

// DefaultRounds returns the rounds a run of these backends gets when the user asks for
// none: DefaultABRounds for exactly two variants of the same proxy mode (an A/B run:
// kube-proxy-nftables@/a,kube-proxy-nftables@/b or iptables,iptables@whole-table-cache),
// otherwise 1.
func DefaultRounds(backends []string) int {
	if len(backends) != 2 || backends[0] == backends[1] {
		return 1
	}
	a, okA := all.Lookup(backends[0])
	b, okB := all.Lookup(backends[1])
	if okA && okB && a.Mode != "" && a.Mode == b.Mode {
		return DefaultABRounds
	}
	return 1
}

// pass is one backend's turn in a run: a fresh lab running every step.
type pass struct {
	backend string
	// round numbers the pass's round (0-based); -1 when the run has one round, whose
	// measurements carry no round label.
	round int
}

// passes orders the backends' turns: one round per backend list, every other round in
// reverse (A B, B A, A B, ...), so that a drift of the machine over the run hits each
// backend as often early as late in a round. One round is the backends in order.
func passes(backends []string, rounds int) []pass {
	if rounds <= 1 {
		out := make([]pass, len(backends))
		for i, b := range backends {
			out[i] = pass{backend: b, round: -1}
		}
		return out
	}
	var out []pass
	for r := range rounds {
		order := slices.Clone(backends)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, b := range order {
			out = append(out, pass{backend: b, round: r})
		}
	}
	return out
}

// options returns the run options of pass p: its round added to the labels of every
// measurement (reports.RoundParam), which the A/B gate pools and resamples by.
func (p pass) options(o RunOptions) RunOptions {
	if p.round < 0 {
		return o
	}
	o.Labels = maps.Clone(o.Labels)
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	o.Labels[reports.RoundParam] = strconv.Itoa(p.round)
	return o
}
