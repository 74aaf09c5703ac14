//go:build linux

// Package perrule is the "iptables-perrule" backend: the rules of the iptables backend,
// applied the way proxies did before iptables-restore batching, one `iptables` call per
// rule (github.com/coreos/go-iptables). It is correct, not fast: it exists to measure how
// the cost of a single rule change grows with the size of the table.
package perrule

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	goipt "github.com/coreos/go-iptables/iptables"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/iptables"
	"kpbench.dev/kpbench/backends/synced"
	"kpbench.dev/kpbench/internal/netns"
)

// Options configure a Backend.
type Options struct {
	// NodeName names the node in errors.
	NodeName string
	// NetNSPath is the node's network namespace; every iptables call runs there.
	NetNSPath string
	// ToolRoot is a prepared root directory iptables runs from (empty: the host's).
	// go-iptables finds and execs its binary itself, so the whole sync runs on a thread
	// chrooted into the root (netns.Tools.Do), and the per-rule timings are of the root's
	// iptables with no wrapper in between.
	ToolRoot string
	// Flavor selects the iptables binary: legacy (the default, as in 2017) or nft.
	Flavor iptables.Flavor
	// MasqueradeBit is KUBE-MARK-MASQ's bit (default 14, 0x4000).
	MasqueradeBit int
}

// RuleTiming is the cost of one rule added by one iptables call.
type RuleTiming struct {
	// Table and Chain received the rule.
	Table, Chain string
	// TableRules is how many of our rules the table held before the call.
	TableRules int
	// Duration is the wall time of the iptables call.
	Duration time.Duration
	// Sync numbers the backend's sync that added the rule (1 for its first; Syncs).
	Sync uint64
}

type chainKey struct{ table, chain string }

// Backend programs a node rule by rule. Safe for concurrent use (syncs are serialised).
type Backend struct {
	opts   Options
	bin    string
	gen    *iptables.Generator
	mu     sync.Mutex
	synced *synced.Tracker // no conntrack cleanup, as the per-rule proxies of 2017
	// installed is what we believe each of our chains holds, in order.
	installed map[chainKey][][]string
	log       timingLog
	// bulk applies syncs with one iptables-restore (SetBulk): the prefill.
	bulk bool
}

var _ backends.Backend = (*Backend)(nil)

// New returns a per-rule backend for one node. The first Sync is full.
func New(opts Options) *Backend {
	if opts.Flavor == "" {
		opts.Flavor = iptables.FlavorLegacy
	}
	if opts.MasqueradeBit == 0 {
		opts.MasqueradeBit = iptables.DefaultMasqueradeBit
	}
	bin, _, _ := opts.Flavor.Binaries()
	return &Backend{opts: opts, bin: bin, gen: iptables.NewGenerator(opts.MasqueradeBit), synced: synced.New(nil)}
}

// tools says where the node's iptables comes from.
func (b *Backend) tools() netns.Tools {
	return netns.Tools{NSPath: b.opts.NetNSPath, Root: b.opts.ToolRoot}
}

// Name returns "iptables-perrule".
func (b *Backend) Name() string { return "iptables-perrule" }

// ForceFullSync makes the next Sync flush and rebuild every chain.
func (b *Backend) ForceFullSync() { b.synced.ForceFullSync() }

// RuleTimings returns the duration of every rule added by the last Sync, in order, with
// the table size at the time (the "per-rule add latency vs table size" curve).
func (b *Backend) RuleTimings() []RuleTiming {
	b.mu.Lock()
	defer b.mu.Unlock()
	out, _ := b.log.since(b.log.syncs - min(b.log.syncs, 1))
	return out
}

// Syncs returns how many syncs the backend has begun: a mark for RuleTimingsSince.
func (b *Backend) Syncs() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.syncs
}

// RuleTimingsSince returns every rule added by the syncs after mark (a value of Syncs),
// in order: all the rules one change added, though it took several syncs (a Service, then
// its EndpointSlice) or was followed by syncs that added nothing. complete is false when
// more syncs than the backend keeps the timings of (16) ran after mark.
func (b *Backend) RuleTimingsSince(mark uint64) (timings []RuleTiming, complete bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.since(mark)
}

// SetBulk switches how the following syncs are applied: on, with one iptables-restore
// --noflush of the chains that changed (all of them on a full sync), as kube-proxy does
// since 2017; off (the default), one iptables call per rule. A scenario prefills the
// table to N Services in bulk, in seconds instead of hours, then times the per-rule
// additions of a few more Services at that size. Bulk syncs record no rule timings.
func (b *Backend) SetBulk(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bulk = on
}

// desiredRules generates the iptables backend's full restore input and splits it into
// chains (in declaration order) and their rules.
func (b *Backend) desiredRules(st *backends.State) ([]chainKey, map[chainKey][][]string, int, error) {
	var buf bytes.Buffer
	b.gen.Generate(&buf, iptables.Request{State: st})
	script, err := iptables.ParseRestore(buf.Bytes())
	if err != nil {
		return nil, nil, 0, err
	}
	var order []chainKey
	want := map[chainKey][][]string{}
	for _, table := range []string{"filter", "nat", "mangle"} {
		for _, c := range script.Chains[table] {
			k := chainKey{table, c}
			order = append(order, k)
			want[k] = nil
		}
	}
	for _, r := range script.Rules {
		k := chainKey{r.Table, r.Chain}
		want[k] = append(want[k], r.Args)
	}
	return order, want, len(script.Rules), nil
}

// Sync diffs the desired rules against what it installed, chain by chain, and deletes and
// inserts one rule per iptables call (common prefix and suffix of a chain are kept). A full
// sync (first, after an error, forced) flushes every chain first.
//
// Equivalent to: a sequence of `iptables -t $t -N/-F/-I/-A/-D/-X ...`.
func (b *Backend) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res backends.SyncResult
	start := time.Now()
	order, want, nrules, err := b.desiredRules(desired)
	res.Generate = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("sync %s %s: generate: %w", b.opts.NodeName, b.Name(), err)
	}
	s := b.synced.Begin()
	res.Full = s.Full || b.installed == nil
	b.log.begin()
	start = time.Now()
	if b.bulk {
		err = b.applyBulk(ctx, order, want, res.Full, &res)
	}
	if err == nil {
		err = b.tools().Do(func() error { // checks the namespace (netns.Guard)
			ipt, err := goipt.New(goipt.Path(b.bin))
			if err != nil {
				return err
			}
			if b.bulk {
				return ensureJumps(ipt)
			}
			return b.apply(ctx, ipt, order, want, res.Full, &res)
		})
	}
	res.Apply = time.Since(start)
	if err != nil {
		b.synced.Failed()
		return res, fmt.Errorf("sync %s %s: %w", b.opts.NodeName, b.Name(), err)
	}
	_ = b.synced.Done(ctx, s, desired) // no conntrack table: nothing fails
	if res.Full {
		res.Rules = nrules
	}
	return res, nil
}

func (b *Backend) apply(ctx context.Context, ipt *goipt.IPTables, order []chainKey, want map[chainKey][][]string, full bool, res *backends.SyncResult) error {
	if full {
		b.installed = map[chainKey][][]string{}
	}
	tableRules := map[string]int{}
	for k, rules := range b.installed {
		tableRules[k.table] += len(rules)
	}
	// Create (or, on a full sync, flush) chains first, so jumps to them can be added.
	for _, k := range order {
		if _, ok := b.installed[k]; ok {
			continue
		}
		if err := ipt.ClearChain(k.table, k.chain); err != nil {
			return fmt.Errorf("create chain %s/%s: %w", k.table, k.chain, err)
		}
		b.installed[k] = nil
	}
	for _, k := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		old, neu := b.installed[k], want[k]
		p := 0
		for p < len(old) && p < len(neu) && slices.Equal(old[p], neu[p]) {
			p++
		}
		s := 0
		for s < len(old)-p && s < len(neu)-p && slices.Equal(old[len(old)-1-s], neu[len(neu)-1-s]) {
			s++
		}
		if p == len(old) && p == len(neu) {
			continue
		}
		for i := len(old) - s - 1; i >= p; i-- {
			if err := ipt.Delete(k.table, k.chain, strconv.Itoa(i+1)); err != nil {
				return fmt.Errorf("delete rule %d of %s/%s: %w", i+1, k.table, k.chain, err)
			}
			tableRules[k.table]--
		}
		cur := p + s // rules now in the chain
		for i := p; i < len(neu)-s; i++ {
			t0 := time.Now()
			var err error
			if s == 0 && i == cur {
				err = ipt.Append(k.table, k.chain, neu[i]...)
			} else {
				err = ipt.Insert(k.table, k.chain, i+1, neu[i]...)
			}
			if err != nil {
				return fmt.Errorf("add rule to %s/%s %q: %w", k.table, k.chain, neu[i], err)
			}
			b.log.add(RuleTiming{Table: k.table, Chain: k.chain, TableRules: tableRules[k.table], Duration: time.Since(t0)})
			tableRules[k.table]++
			cur++
			res.Rules++
		}
		b.installed[k] = neu
	}
	// Remove chains no longer wanted: flush all, then delete (they may reference each other).
	var stale []chainKey
	for k := range b.installed {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	slices.SortFunc(stale, func(a, c chainKey) int {
		if a.table != c.table {
			return compare(a.table, c.table)
		}
		return compare(a.chain, c.chain)
	})
	for _, k := range stale {
		if err := ipt.ClearChain(k.table, k.chain); err != nil {
			return fmt.Errorf("flush chain %s/%s: %w", k.table, k.chain, err)
		}
	}
	for _, k := range stale {
		if err := ipt.DeleteChain(k.table, k.chain); err != nil {
			return fmt.Errorf("delete chain %s/%s: %w", k.table, k.chain, err)
		}
		delete(b.installed, k)
	}
	return ensureJumps(ipt)
}

// ensureJumps inserts the jumps from the built-in chains that are missing.
func ensureJumps(ipt *goipt.IPTables) error {
	for _, j := range iptables.Jumps() {
		ok, err := ipt.Exists(j.Table, j.From, j.Args()...)
		if err != nil {
			return fmt.Errorf("check jump %s/%s -> %s: %w", j.Table, j.From, j.To, err)
		}
		if !ok {
			if err := ipt.Insert(j.Table, j.From, 1, j.Args()...); err != nil {
				return fmt.Errorf("add jump %s/%s -> %s: %w", j.Table, j.From, j.To, err)
			}
		}
	}
	return nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Cleanup removes the jumps and every chain this backend installed. The next Sync is full.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.tools().Do(func() error {
		ipt, err := goipt.New(goipt.Path(b.bin))
		if err != nil {
			return err
		}
		for _, j := range iptables.Jumps() {
			if err := ipt.DeleteIfExists(j.Table, j.From, j.Args()...); err != nil {
				return err
			}
		}
		for k := range b.installed {
			if err := ipt.ClearChain(k.table, k.chain); err != nil {
				return err
			}
		}
		for k := range b.installed {
			if err := ipt.DeleteChain(k.table, k.chain); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
	b.installed = nil
	b.synced.Reset()
	if err != nil {
		return fmt.Errorf("cleanup %s %s: %w", b.opts.NodeName, b.Name(), err)
	}
	return nil
}
