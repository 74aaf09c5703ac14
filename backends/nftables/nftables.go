// Package nftables is the nftables backend: kube-proxy's nftables mode (GA since
// Kubernetes 1.33) for one node, written with sigs.k8s.io/knftables.
//
// Everything lives in one table, `ip kube-proxy`, with kube-proxy's layout and names:
//
//   - base chains filter-prerouting-pre-dnat and filter-output-pre-dnat (dstnat-10),
//     filter-input/forward/output (filter) and nat-prerouting/output/postrouting, as in
//     kube-proxy v1.37, jumping to services, firewall-check,
//     service-endpoints-check, nodeport-endpoints-check, cluster-ips-check and masquerading;
//   - verdict maps service-ips, no-endpoint-services and firewall-ips keyed
//     `ipv4_addr . inet_proto . inet_service`, service-nodeports and no-endpoint-nodeports
//     keyed `inet_proto . inet_service`; sets cluster-ips, nodeport-ips and
//     hairpin-connections (local endpoints as `ip . ip . proto . port`, masqueraded by
//     the masquerading chain when a pod reaches itself);
//   - per service port, chains service-/local-/external-/firewall-HASH-ns/name/proto/port.
//     As in kube-proxy v1.37, a service chain DNATs by itself (`dnat to` for one
//     endpoint, `dnat ip addr . port to numgen random mod N map { ... }` for more);
//     only with sessionAffinity ClientIP does it pick one of the per-endpoint chains
//     endpoint-HASH-ns/name/proto/port__IP/port (`numgen random mod N vmap`), which
//     record the client in their affinity-... sets. HASH is the first 8 characters of
//     base32(sha256(name)), as kube-proxy's hashAndTruncate.
//
// Rule generation (rules.go) is pure code; Backend.Sync writes one knftables transaction
// per sync (a full sync creates its new, still empty and unreferenced chains in a
// transaction of their own first: see writeFull). The first sync, the sync after an error, after a change of node-wide settings
// and after the table disappeared are full: the table's fixed part is recreated, every set
// and map flushed and refilled, every service chain rewritten. Other syncs are
// incremental: they write only the chains of the service ports that changed
// (ServicePort.Equal against the last applied state) and the set and map elements that
// differ.
//
// Stale chains (of removed services, or no longer used by a changed one) are flushed and
// deleted in the same transaction that removes the last references to them. kube-proxy
// instead flushes them and deletes them a second later, because kernels before 6.2
// noticed late that a chain whose map element was just deleted is unreferenced; this
// lab's kernels are newer.
package nftables

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/knftables"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/backends/synced"
)

// Name is the backend's name.
const Name = "nftables"

// Options configures a Backend.
type Options struct {
	// NodeName names the node in errors.
	NodeName string
	// NetNSPath is the node's network namespace (e.g. /run/netns/kpb-x-node1); nft runs
	// inside it. Required by New; the host's root namespace is never used.
	NetNSPath string
	// ToolRoot is a prepared root directory that nft runs from, chrooted (netns.Tools);
	// empty: the host's nft.
	ToolRoot string
}

// kernel is what a Backend needs from the node: running transactions and looking at the
// table. nsKernel (kernel_linux.go) runs nft inside the node's namespace; ifaceKernel
// uses any knftables.Interface, typically the in-memory fake.
type kernel interface {
	run(ctx context.Context, tx *knftables.Transaction) error
	list(ctx context.Context, objectType string) ([]string, error)
	// tableExists reports whether `table ip kube-proxy` is present.
	tableExists(ctx context.Context) (bool, error)
}

// errNotFound marks an nft failure that says an object does not exist (knftables'
// IsNotFound, for nft run by nsKernel).
var errNotFound = errors.New("not found")

// isNotFound reports whether err says that an nft object does not exist, whether nft ran
// through knftables (the fake) or through nsKernel.
func isNotFound(err error) bool { return knftables.IsNotFound(err) || errors.Is(err, errNotFound) }

// appliedService is what the kernel holds for one service port after a successful sync.
type appliedService struct {
	// sp is a private copy of the port as applied.
	sp     *backends.ServicePort
	cat    backends.Categorized
	chains []string
	sets   []setPlan
	elems  []element
	// epoch is the last incremental sync that found the port in the desired state.
	epoch uint64
}

// Backend programs one node's `table ip kube-proxy`. It implements backends.Backend; its
// methods are safe for concurrent use (syncs are serialised).
type Backend struct {
	opts Options
	nft  knftables.Interface
	k    kernel

	mu sync.Mutex
	// synced says when a sync must be full (start, errors, Cleanup, ForceFullSync),
	// keeps the last synced state and cleans UDP conntrack entries after each sync.
	synced *synced.Tracker
	// baseChainsRecreated is set once a full sync has re-created the base chains.
	baseChainsRecreated bool
	cfg                 config
	applied             map[backends.ServicePortName]*appliedService
	elems               *elementStore
	// epoch numbers incremental syncs (see appliedService.epoch).
	epoch uint64
}

var _ backends.Backend = (*Backend)(nil)

// newBackend returns a Backend writing through k, whose transactions nft makes; ct is the
// node's conntrack table (nil: no cleanup).
func newBackend(opts Options, nft knftables.Interface, k kernel, ct conntrack.Table) *Backend {
	return &Backend{opts: opts, nft: nft, k: k, synced: synced.New(ct), elems: newElementStore()}
}

// Name returns "nftables".
func (b *Backend) Name() string { return Name }

// ForceFullSync makes the next sync full (the agent's periodic resync; measurements of
// full sync cost).
func (b *Backend) ForceFullSync() { b.synced.ForceFullSync() }

// wrap adds the node, backend and operation to err.
func (b *Backend) wrap(op string, err error) error {
	return fmt.Errorf("%s %s %s: %w", op, b.opts.NodeName, Name, err)
}

// Sync makes `table ip kube-proxy` match desired, in one transaction: full on the first
// sync, after an error, after a change of NodeIPs/ClusterCIDR/MasqueradeAll or when the
// table is gone; incremental otherwise.
//
// Equivalent to: `nft -f -` with the generated transaction, inside the node's namespace.
func (b *Backend) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res backends.SyncResult

	cfg := configOf(desired)
	s := b.synced.Begin()
	full := s.Full
	if !full && !cfg.equal(b.cfg) {
		full, res.FullReason = true, "the node IPs, cluster CIDR or masqueradeAll changed"
	}
	var applyTime time.Duration
	if !full {
		t0 := time.Now()
		ok, err := b.k.tableExists(ctx)
		applyTime += time.Since(t0)
		if err != nil {
			b.synced.Failed()
			return res, b.wrap("sync", fmt.Errorf("check table: %w", err))
		}
		if !ok {
			full, res.FullReason = true, "table ip "+Table+" is gone"
		}
	}

	var kernelChains, kernelSets []string
	if full {
		// Leftovers of an earlier run or of a failed sync: find them to delete them.
		t0 := time.Now()
		var err error
		kernelChains, kernelSets, err = b.listServiceObjects(ctx)
		applyTime += time.Since(t0)
		if err != nil {
			b.synced.Failed()
			return res, b.wrap("sync", err)
		}
	}

	start := time.Now()
	tx := b.nft.NewTransaction()
	w := &writer{tx: tx}
	var pending *pendingSync
	type step struct {
		what string
		tx   *knftables.Transaction
	}
	var before []step
	if full {
		var fs *fullSync
		pending, fs = b.writeFull(w, cfg, desired, kernelChains, kernelSets)
		if fs.create != nil {
			before = append(before, step{"create chains", fs.create})
		}
		for i, f := range fs.fill {
			before = append(before, step{fmt.Sprintf("fill new chains (%d of %d)", i+1, len(fs.fill)), f})
		}
	} else {
		pending = b.writeIncremental(w, cfg, desired)
	}
	res.Generate = time.Since(start)
	res.Full = full
	res.Rules = w.rules
	res.ChangedServices = pending.changed

	// New, still unreferenced chains and their rules: invisible to traffic, so this does
	// not break the atomicity of the sync (see writeFull).
	for _, pre := range before {
		t0 := time.Now()
		err := b.k.run(ctx, pre.tx)
		applyTime += time.Since(t0)
		text := pre.tx.String()
		res.Bytes += len(text)
		if err != nil {
			res.Apply = applyTime
			b.synced.Failed()
			return res, b.wrap("sync", fmt.Errorf("%s (%d operations): %w%s",
				pre.what, pre.tx.NumOperations(), err, failingLines(err, text)))
		}
	}
	if tx.NumOperations() > 0 {
		t0 := time.Now()
		err := b.k.run(ctx, tx)
		applyTime += time.Since(t0)
		res.Apply = applyTime
		text := tx.String()
		res.Bytes += len(text)
		if err != nil {
			b.synced.Failed()
			return res, b.wrap("sync", fmt.Errorf("nft transaction (%d operations): %w%s",
				tx.NumOperations(), err, failingLines(err, text)))
		}
	}
	res.Apply = applyTime

	b.commit(pending, cfg)
	// The rules are in place; a conntrack cleanup failure is returned, but the next
	// sync need not be full.
	if err := b.synced.Done(ctx, s, desired); err != nil {
		return res, b.wrap("sync", err)
	}
	return res, nil
}

// commit records that the transaction of pending succeeded.
func (b *Backend) commit(pending *pendingSync, cfg config) {
	if pending.full {
		b.applied = pending.applied
		b.baseChainsRecreated = true
	} else {
		for _, pr := range pending.pairs {
			if pr.now == nil {
				delete(b.applied, pr.old.sp.Name)
			} else {
				b.applied[pr.now.sp.Name] = pr.now
			}
		}
	}
	b.elems = pending.elems
	b.elems.commit()
	b.cfg = cfg
}

// listServiceObjects lists the per-service chains and affinity sets in the kernel (none
// when the table does not exist).
func (b *Backend) listServiceObjects(ctx context.Context) (chains, sets []string, err error) {
	chains, exists, err := b.listNamed(ctx, "chains", isServiceChainName)
	if err != nil || !exists {
		return nil, nil, err
	}
	if sets, _, err = b.listNamed(ctx, "sets", isAffinitySetName); err != nil {
		return nil, nil, err
	}
	return chains, sets, nil
}

// listNamed lists the table's objects of a type ("chains", "sets") whose name keep
// accepts; exists is false when the table does not exist.
func (b *Backend) listNamed(ctx context.Context, objectType string, keep func(string) bool) (names []string, exists bool, err error) {
	all, err := b.k.list(ctx, objectType)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("list %s: %w", objectType, err)
	}
	for _, name := range all {
		if keep(name) {
			names = append(names, name)
		}
	}
	return names, true, nil
}

// pendingSync is the state the kernel will hold if the transaction succeeds.
type pendingSync struct {
	full bool
	// applied replaces Backend.applied after a full sync.
	applied map[backends.ServicePortName]*appliedService
	// pairs are the service ports whose chains were written or removed, before and
	// after; an incremental sync applies them to Backend.applied.
	pairs []servicePair
	elems *elementStore
	// changed counts the service ports whose chains were written or removed.
	changed int
}

// servicePair is one service port before (old, nil if new) and after (now, nil if
// removed) a sync.
type servicePair struct{ old, now *appliedService }

// planned is one service port of the desired state with its plan.
type planned struct {
	sp   *backends.ServicePort
	plan *servicePlan
}

// record makes the appliedService of p, copying the port so that later changes by the
// caller cannot alter what we believe the kernel holds.
func record(p planned) *appliedService {
	return &appliedService{
		sp:     cloneServicePort(p.sp),
		cat:    p.plan.cat,
		chains: p.plan.chainNames(),
		sets:   p.plan.sets,
		elems:  p.plan.elems,
	}
}

func cloneServicePort(sp *backends.ServicePort) *backends.ServicePort {
	c := *sp
	c.ExternalIPs = slices.Clone(sp.ExternalIPs)
	c.LoadBalancerIPs = slices.Clone(sp.LoadBalancerIPs)
	c.LoadBalancerSourceRanges = slices.Clone(sp.LoadBalancerSourceRanges)
	c.Endpoints = slices.Clone(sp.Endpoints)
	return &c
}

// fillServicesPerTransaction bounds the services whose new chains one fill transaction
// writes. Every `numgen ... map { ... }` or `vmap` rule creates an anonymous map, and binding it
// makes the kernel walk the transaction's whole commit list (__nft_set_trans_bind and
// nft_set_lookup_byid), so one transaction with A such rules costs O(A x its length):
// measured here, 20k services took 101 s of kernel time in one transaction. Each extra
// transaction costs one more nft run, which lists every chain and set of the table.
const fillServicesPerTransaction = 4000

// fullSync is the transactions of a full sync, in the order they run: create and fill
// build new, still unreferenced chains (invisible to traffic); main switches traffic to
// the new ruleset atomically. create is nil when there is nothing new to create.
type fullSync struct {
	create *knftables.Transaction
	fill   []*knftables.Transaction
	main   *knftables.Transaction
}

// writeFull writes a whole ruleset: fixed part, every service, and the deletion of the
// kernel's per-service chains and affinity sets that the desired state no longer has.
//
// Chains that do not exist in the kernel yet (kernelChains lists those that do) are
// created by create, a transaction of their own: nft refers to a chain created in the
// same batch by its transaction ID, which the kernel resolves by walking the batch
// (nft_chain_lookup_byid), so rules written into new chains cost O(batch) each and a
// 250k-endpoint sync became quadratic. Chains that exist before the batch are found by
// name in a hash table. Nothing references a new chain until main adds the map elements
// and rewrites the existing chains that lead to it, so the rules of new chains are
// written by fill transactions before main (service chains first, so that their
// anonymous maps are bound while the commit list is short: see
// fillServicesPerTransaction). main then holds the fixed part, the flush and rewrite of
// chains that existed before (per service, service chains first, for the same reason),
// the element refills and the removal of stale objects, and switches traffic atomically
// as a single transaction would.
func (b *Backend) writeFull(w *writer, cfg config, desired *backends.State, kernelChains, kernelSets []string) (*pendingSync, *fullSync) {
	tx := w.tx
	fs := &fullSync{create: b.nft.NewTransaction(), main: tx}
	inKernel := make(map[string]bool, len(kernelChains))
	for _, c := range kernelChains {
		inKernel[c] = true
	}
	setInKernel := make(map[string]bool, len(kernelSets))
	for _, s := range kernelSets {
		setInKernel[s] = true
	}
	fs.create.Add(&knftables.Table{Comment: knftables.PtrTo(tableComment)})
	ps := &pendingSync{full: true, applied: make(map[backends.ServicePortName]*appliedService, len(desired.Services)), elems: newElementStore()}
	writeSetup(w, cfg, !b.baseChainsRecreated)

	plans := make([]planned, 0, len(desired.Services))
	activeChains := map[string]bool{}
	activeSets := map[string]bool{}
	created := false // a chain or set that the kernel lacks
	for _, in := range desired.Services {
		sp := ipv4Only(in)
		if sp == nil || ps.applied[sp.Name] != nil {
			continue
		}
		p := planned{sp: sp, plan: planService(cfg, sp)}
		plans = append(plans, p)
		rec := record(p)
		ps.applied[sp.Name] = rec
		ps.pairs = append(ps.pairs, servicePair{b.applied[sp.Name], rec})
		for _, c := range p.plan.chains {
			activeChains[c.name] = true
			if !inKernel[c.name] {
				fs.create.Add(&knftables.Chain{Name: c.name})
				created = true
			}
		}
		for _, s := range p.plan.sets {
			activeSets[s.name] = true
			if !setInKernel[s.name] {
				fs.create.Add(affinitySet(s))
				created = true
			}
		}
	}
	ps.changed = len(plans)
	for name, old := range b.applied {
		if ps.applied[name] == nil {
			ps.pairs = append(ps.pairs, servicePair{old, nil})
		}
	}
	// Nothing new (a resync of what the kernel holds): no create transaction, and no
	// fill either; main adds the table itself. Saves an nft run (25 ms at 1k).
	if !created {
		fs.create = nil
	}

	// Rules of new chains: service chains, then endpoint chains, per batch of services.
	for start := 0; start < len(plans); start += fillServicesPerTransaction {
		batch := plans[start:min(start+fillServicesPerTransaction, len(plans))]
		fw := &writer{tx: b.nft.NewTransaction()}
		for _, endpoints := range []bool{false, true} {
			for _, p := range batch {
				for _, c := range p.plan.chains {
					if !inKernel[c.name] && isEndpointChain(c.name) == endpoints {
						writeRules(fw, c)
					}
				}
			}
		}
		if fw.tx.NumOperations() > 0 {
			fs.fill = append(fs.fill, fw.tx)
			w.rules += fw.rules
		}
	}
	// Chains that existed: emptied and refilled in main, service by service.
	for _, endpoints := range []bool{false, true} {
		for _, p := range plans {
			for _, c := range p.plan.chains {
				if inKernel[c.name] && isEndpointChain(c.name) == endpoints {
					tx.Flush(&knftables.Chain{Name: c.name})
					writeRules(w, c)
				}
			}
		}
	}
	var stale []string
	for _, c := range kernelChains {
		if !activeChains[c] {
			tx.Flush(&knftables.Chain{Name: c})
			stale = append(stale, c)
		}
	}
	// Every rule that could use an affinity set has been flushed above.
	for _, s := range kernelSets {
		if !activeSets[s] {
			tx.Delete(&knftables.Set{Name: s})
		}
	}
	for _, p := range plans {
		for _, s := range p.plan.sets {
			if setInKernel[s.name] {
				tx.Add(affinitySet(s))
			}
		}
		for _, e := range p.plan.elems {
			ps.elems.add(e)
		}
	}
	w.rules += ps.elems.write(tx, true)
	for _, c := range stale {
		tx.Delete(&knftables.Chain{Name: c})
	}
	return ps, fs
}

// writeIncremental writes the changes from the last applied state to desired: chains of
// changed, added and removed service ports, and the element differences.
func (b *Backend) writeIncremental(w *writer, cfg config, desired *backends.State) *pendingSync {
	tx := w.tx
	ps := &pendingSync{elems: b.elems}
	// Mark the unchanged ports with this sync's epoch, instead of building a new map
	// of every port: an incremental sync should cost what changed.
	b.epoch++
	var changed []planned
	var removed []*appliedService
	added := map[backends.ServicePortName]bool{}
	for _, in := range desired.Services {
		sp := ipv4Only(in)
		if sp == nil || added[sp.Name] {
			continue
		}
		old := b.applied[sp.Name]
		if old != nil {
			if old.epoch == b.epoch {
				continue // duplicate name: the first one wins
			}
			old.epoch = b.epoch
			if old.sp.Equal(sp) {
				continue
			}
		}
		added[sp.Name] = true
		changed = append(changed, planned{sp: sp, plan: planService(cfg, sp)})
	}
	for _, old := range b.applied {
		if old.epoch != b.epoch {
			removed = append(removed, old)
		}
	}
	// Map iteration order is random; keep transactions reproducible.
	slices.SortFunc(removed, func(a, c *appliedService) int { return backends.CompareNames(a.sp.Name, c.sp.Name) })
	ps.changed = len(changed) + len(removed)
	for _, old := range removed {
		ps.pairs = append(ps.pairs, servicePair{old, nil})
	}
	for _, p := range changed {
		ps.pairs = append(ps.pairs, servicePair{b.applied[p.sp.Name], record(p)})
	}

	// Chains: flush the stale ones, create or empty the used ones.
	var stale []string
	for _, old := range removed {
		for _, c := range old.chains {
			tx.Flush(&knftables.Chain{Name: c})
			stale = append(stale, c)
		}
	}
	for _, p := range changed {
		now := map[string]bool{}
		for _, c := range p.plan.chains {
			now[c.name] = true
			w.ensureChain(c.name)
		}
		if old := b.applied[p.sp.Name]; old != nil {
			for _, c := range old.chains {
				if !now[c] {
					tx.Flush(&knftables.Chain{Name: c})
					stale = append(stale, c)
				}
			}
		}
	}
	// Affinity sets: every rule that used the old ones has been flushed above. A set
	// whose timeout changes is recreated (the kernel refuses to change it in place).
	for _, old := range removed {
		for _, s := range old.sets {
			tx.Delete(&knftables.Set{Name: s.name})
		}
	}
	for _, p := range changed {
		oldSets := map[string]int32{}
		if old := b.applied[p.sp.Name]; old != nil {
			for _, s := range old.sets {
				oldSets[s.name] = s.timeout
			}
		}
		for _, s := range p.plan.sets {
			t, had := oldSets[s.name]
			delete(oldSets, s.name)
			if had && t == s.timeout {
				continue
			}
			if had {
				tx.Delete(&knftables.Set{Name: s.name})
			}
			tx.Add(affinitySet(s))
		}
		for _, name := range sortedKeys(oldSets) {
			tx.Delete(&knftables.Set{Name: name})
		}
	}
	// Rules and elements.
	for _, old := range removed {
		for _, e := range old.elems {
			ps.elems.remove(e)
		}
	}
	for _, p := range changed {
		for _, c := range p.plan.chains {
			writeRules(w, c)
		}
		if old := b.applied[p.sp.Name]; old != nil {
			for _, e := range old.elems {
				ps.elems.remove(e)
			}
		}
		for _, e := range p.plan.elems {
			ps.elems.add(e)
		}
	}
	w.rules += ps.elems.write(tx, false)
	for _, c := range stale {
		tx.Delete(&knftables.Chain{Name: c})
	}
	return ps
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// stdinLine finds "/dev/stdin:LINE:" in nft's error messages.
var stdinLine = regexp.MustCompile(`stdin:(\d+):`)

// failingLines returns the transaction lines nft complained about, with one line of
// context either side, formatted for an error message ("" when nft named no line).
func failingLines(err error, text string) string {
	m := stdinLine.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	n, convErr := strconv.Atoi(m[1])
	if convErr != nil || n < 1 {
		return ""
	}
	lines := strings.Split(text, "\n")
	var b strings.Builder
	for i := max(n-2, 0); i < min(n+1, len(lines)); i++ {
		mark := "  "
		if i == n-1 {
			mark = "> "
		}
		fmt.Fprintf(&b, "\n%s%d: %s", mark, i+1, lines[i])
	}
	return b.String()
}

// Cleanup deletes `table ip kube-proxy` and everything in it. A missing table is not an
// error. The next Sync is full.
//
// Equivalent to: `nft delete table ip kube-proxy`.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.synced.Reset()
	b.applied = nil
	b.elems = newElementStore()
	tx := b.nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	err := b.k.run(ctx, tx)
	if err != nil && !isNotFound(err) {
		return b.wrap("cleanup", err)
	}
	return nil
}
