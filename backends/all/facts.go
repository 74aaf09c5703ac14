//go:build linux

package all

import (
	"context"
	"fmt"
	"net/netip"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/backends/perrule"
	"kpbench.dev/kpbench/internal/netns"
)

// RuleFamily is the kind of kernel state a backend writes, which decides how its rules are
// dumped and counted.
type RuleFamily string

// The rule families of the registered backends.
const (
	// FamilyIPTablesNFT is iptables rules through the nf_tables API (iptables-nft).
	FamilyIPTablesNFT RuleFamily = "iptables-nft"
	// FamilyIPTablesLegacy is iptables rules through x_tables (iptables-legacy).
	FamilyIPTablesLegacy RuleFamily = "iptables-legacy"
	// FamilyNFTables is `table ip kube-proxy` written in nft's own language.
	FamilyNFTables RuleFamily = "nftables"
	// FamilyIPVS is IPVS virtual and real servers, plus ipsets and a constant iptables-nft
	// ruleset.
	FamilyIPVS RuleFamily = "ipvs"
	// FamilyUserspace is a proxy in kpbench's process, reached through iptables-nft REDIRECT
	// and DNAT rules.
	FamilyUserspace RuleFamily = "userspace"
)

// Normalizer turns a rule dump into the form `kpbench diff-rules` compares (counters and
// handles dropped, hashed names made readable, unordered parts sorted).
type Normalizer struct {
	// Kind names the dump format it reads ("iptables-save", "nft"); two backends can be
	// diffed only when their normalisers have the same Kind.
	Kind string
	// Normalize returns the comparable form of raw.
	Normalize func(raw string, o kubeproxy.NormalizeOptions) string
}

// Capabilities are what a backend can do beyond backends.Backend, and what it needs.
type Capabilities struct {
	// PerRuleTiming: the backend times each rule it adds (RuleTimerOf).
	PerRuleTiming bool
	// IPVSExperiments: the scheduler and real-server weights can be changed on a running
	// backend (IPVSExperimentsOf).
	IPVSExperiments bool
	// NeedsIPVS: the kernel must have IPVS (here: only inside `kpbench vm run`).
	NeedsIPVS bool
	// NeedsAPIServer: the backend is upstream kube-proxy, built by `make upstream`, and
	// reads Services and EndpointSlices from a real API server (see NeedsAPIServer).
	NeedsAPIServer bool
	// ExplicitOnly: `--backend all` leaves it out; it runs only when named.
	ExplicitOnly bool
	// WholeTableCache: the backend honours Settings.IPTablesWholeTableCache.
	WholeTableCache bool
}

// Facts are what kpbench knows about one backend besides how to build it: how to read
// its rules back, how to explain a failure, how to compare its rules with upstream's, and
// what it can do. Every fact lives here, with the backend's factory, so that no code
// outside backends/ decides anything by a backend's name.
type Facts struct {
	// Name is the backend's name as users select it ("iptables", "kube-proxy-nftables").
	Name string
	// Doc is one line saying what the backend is.
	Doc string
	// Family is the kind of kernel state it writes.
	Family RuleFamily
	// Mode is the KubeProxyConfiguration mode whose section configures it.
	Mode kubeproxy.Mode
	// ModeDefault marks the backend that stands for Mode when a scenario's proxy
	// configuration names only a mode (ForMode).
	ModeDefault bool
	// Dump lists its rules in a node's namespace, in one command or several whose outputs
	// are concatenated: what CountRules counts, what diff-rules normalises and what a
	// failed step's node state starts with.
	Dump []netns.Command
	// CountRules counts the rules (and map/set elements, or virtual and real servers) of
	// Dump's output.
	CountRules func(dump []byte) (int, error)
	// State are the commands that explain a packet's fate beyond the rule dump (IPVS's
	// statistics and connection table), run after Dump when a step fails. NodeState adds
	// conntrack's flows for every backend.
	State []netns.Command
	// Normalizer is nil when diff-rules cannot compare this backend's rules.
	Normalizer *Normalizer
	// Caps are its capabilities and needs.
	Caps Capabilities
	// Variants says which NAME@VARIANT forms it accepts ("" when none).
	Variants string
}

// conntrackList is the last command of every node state: conntrack's flows.
var conntrackList = netns.Command{Path: "conntrack", Args: []string{"-L"}}

// NodeState returns the commands that a failed step's node state runs in each node's
// namespace, in order: the rule dump, the backend's other state commands, then
// conntrack's flows.
func (f Facts) NodeState() []netns.Command {
	out := append([]netns.Command(nil), f.Dump...)
	out = append(out, f.State...)
	return append(out, conntrackList)
}

// DumpRules runs the backend's rule dump in the namespace at nsPath, with the tools of the
// settings' tool root, and returns what it printed.
func (f Facts) DumpRules(ctx context.Context, nsPath string, s Settings) ([]byte, error) {
	var out []byte
	for _, c := range f.Dump {
		res, err := s.Tools(nsPath).Exec(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("dump %s rules: %w", f.Name, err)
		}
		out = append(out, res.Stdout...)
	}
	return out, nil
}

// KernelRules dumps and counts the backend's rules in the namespace at nsPath.
func (f Facts) KernelRules(ctx context.Context, nsPath string, s Settings) (int, error) {
	out, err := f.DumpRules(ctx, nsPath, s)
	if err != nil {
		return 0, err
	}
	n, err := f.CountRules(out)
	if err != nil {
		return 0, fmt.Errorf("count %s rules: %w", f.Name, err)
	}
	return n, nil
}

// IPVSExperiments is what the ipvs backend lets an experiment change on a running node:
// the scheduler of every virtual server and the weights of real servers (the next sync
// is full and applies them). See backends/ipvs.Backend.SetScheduler and SetWeights.
type IPVSExperiments interface {
	SetScheduler(name string) error
	SetWeights(w map[netip.Addr]int) error
}

// RuleTimer is what the iptables-perrule backend reports: the cost of each iptables call
// of its last sync, or of every sync after a mark (Syncs), with the table's size at the
// time, and its switch to bulk restores (the prefill before per-rule additions at a size).
type RuleTimer interface {
	RuleTimings() []perrule.RuleTiming
	Syncs() uint64
	RuleTimingsSince(mark uint64) ([]perrule.RuleTiming, bool)
	SetBulk(on bool)
}

// IPVSExperimentsOf returns b's experiment controls, when b (or the backend it wraps) has
// the IPVSExperiments capability.
func IPVSExperimentsOf(b backends.Backend) (IPVSExperiments, bool) { return as[IPVSExperiments](b) }

// RuleTimerOf returns b's per-rule timings, when b (or the backend it wraps) has the
// PerRuleTiming capability.
func RuleTimerOf(b backends.Backend) (RuleTimer, bool) { return as[RuleTimer](b) }

// as returns b as a T, or the first backend b wraps (Unwrap) that is one.
func as[T any](b backends.Backend) (T, bool) {
	for range 8 { // wrappers do not nest deeper; never loop forever on a cycle
		if v, ok := b.(T); ok {
			return v, true
		}
		u, ok := b.(interface{ Unwrap() backends.Backend })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	var zero T
	return zero, false
}
