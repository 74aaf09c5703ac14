//go:build linux

package iptables

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/backends/synced"
	"kpbench.dev/kpbench/internal/netns"
)

// Options configure a Backend. The caller decides when to force full syncs (kube-proxy's
// syncPeriod) and calls ForceFullSync.
type Options struct {
	// Name, when set, replaces the backend's name (a variant's full reference, such as
	// iptables@whole-table-cache).
	Name string
	// NodeName names the node in errors.
	NodeName string
	// NetNSPath is the node's network namespace (/run/netns/<name>); every tool runs there.
	NetNSPath string
	// ToolRoot is a prepared root directory the tools run from, chrooted (netns.Tools);
	// empty: the host's. LockFile is then a path inside it.
	ToolRoot string
	// Flavor selects iptables-nft (default) or iptables-legacy.
	Flavor Flavor
	// LockFile is exported as XTABLES_LOCKFILE to every tool, so that nodes do not share
	// the legacy xtables lock ("" leaves the default /run/xtables.lock).
	LockFile string
	// MasqueradeBit is the bit of KUBE-MARK-MASQ (default DefaultMasqueradeBit, 0x4000).
	MasqueradeBit int
	// LockWait bounds how long each tool waits for the xtables lock (`-w SECONDS`, rounded
	// up to whole seconds; kube-proxy uses 5s). 0 waits until the sync's context ends.
	LockWait time.Duration
	// WholeTableCache, on the nft flavour, starts the nat table of a large restore with a
	// chainless `-S` (see cacheHint): iptables-nft 1.8.9 then caches the whole table at
	// once instead of keeping a sorted list of every chain the input names, which costs a
	// walk of that list per command and makes big --noflush restores quadratic (measured
	// in docs/findings.md, "`make bench`, 2026-12-02"). The rules programmed are the
	// same; kube-proxy does not do this, so it is off by default and results say when it
	// was on. Ignored by the legacy flavour, which has no such list.
	WholeTableCache bool
	// NaiveProbabilities writes every endpoint rule of a Service but the last with
	// probability 1/n (n its endpoints) instead of 1/(n-i): the classic bug of early
	// proxies, which skews the shares (1/3, 2/9, 4/9 for 3 endpoints). It exists only for
	// iptables@skew, which proves that the distribution checks catch it.
	NaiveProbabilities bool
}

// Backend is the "iptables" proxy mode: one `iptables-restore --noflush --counters` per sync,
// partial when it can be, as kube-proxy since 1.28. It is safe for concurrent use (syncs
// are serialised).
type Backend struct {
	opts               Options
	ipt, restore, save string
	env                []string
	exec               execer
	synced             *synced.Tracker
	gen                *Generator
	mu                 sync.Mutex
	buf                bytes.Buffer
	installed          map[string]struct{}
	failures           int
	hintWork           float64 // cacheHintWork; tests lower it
}

var _ backends.Backend = (*Backend)(nil)

// New returns a Backend for one node. Nothing touches the kernel until the first Sync,
// which is full.
func New(opts Options) *Backend {
	if opts.Flavor == "" {
		opts.Flavor = FlavorNFT
	}
	if opts.MasqueradeBit == 0 {
		opts.MasqueradeBit = DefaultMasqueradeBit
	}
	return newBackend(opts, netns.Tools{NSPath: opts.NetNSPath, Root: opts.ToolRoot}, conntrack.Namespace{Path: opts.NetNSPath})
}

func newBackend(opts Options, ex execer, ct conntrack.Table) *Backend {
	b := &Backend{opts: opts, exec: ex, synced: synced.New(ct), gen: NewGenerator(opts.MasqueradeBit), hintWork: cacheHintWork}
	b.gen.naive = opts.NaiveProbabilities
	b.ipt, b.restore, b.save = opts.Flavor.Binaries()
	if opts.LockFile != "" {
		b.env = []string{"XTABLES_LOCKFILE=" + opts.LockFile}
	}
	return b
}

// Name returns Options.Name, by default "iptables" for the nft flavour and
// "iptables-legacy" for legacy.
func (b *Backend) Name() string {
	if b.opts.Name != "" {
		return b.opts.Name
	}
	if b.opts.Flavor == FlavorLegacy {
		return "iptables-legacy"
	}
	return "iptables"
}

// ForceFullSync makes the next Sync rewrite everything (kube-proxy does so every syncPeriod).
func (b *Backend) ForceFullSync() { b.synced.ForceFullSync() }

// RestoreFailures returns how many iptables-restore runs failed
// (kube-proxy's sync_proxy_rules_iptables_restore_failures_total).
func (b *Backend) RestoreFailures() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures
}

func (b *Backend) run(ctx context.Context, path string, stdin []byte, args ...string) (execResult, error) {
	return b.exec.Exec(ctx, netns.Command{Path: path, Args: b.lockArgs(args), Stdin: stdin, Env: b.env})
}

// runDiscarding is run for a tool whose standard output nobody reads.
func (b *Backend) runDiscarding(ctx context.Context, path string, stdin []byte, args ...string) (execResult, error) {
	return b.exec.Exec(ctx, netns.Command{Path: path, Args: b.lockArgs(args), Stdin: stdin, Env: b.env, DiscardStdout: true})
}

// lockArgs gives "-w" the configured lock wait in seconds.
func (b *Backend) lockArgs(args []string) []string {
	if b.opts.LockWait > 0 && slices.Contains(args, "-w") {
		secs := strconv.Itoa(int((b.opts.LockWait + time.Second - 1) / time.Second))
		var withWait []string
		for _, a := range args {
			withWait = append(withWait, a)
			if a == "-w" {
				withWait = append(withWait, secs)
			}
		}
		args = withWait
	}
	return args
}

func (b *Backend) errorf(format string, args ...any) error {
	return fmt.Errorf("sync %s %s: "+format, append([]any{b.opts.NodeName, b.Name()}, args...)...)
}

// Sync writes desired to the kernel with one iptables-restore. It is full at the start,
// after an error, after ForceFullSync and when the mangle canary chain has vanished;
// otherwise only the chains of service ports that differ from the last applied state
// (ServicePort.Equal) are written, and chains of removed services and endpoints deleted.
// After a successful restore, UDP conntrack entries of removed endpoints are deleted.
func (b *Backend) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res backends.SyncResult

	s := b.synced.Begin()
	full := s.Full
	if !full {
		ok, err := b.canaryExists(ctx)
		if err != nil {
			b.synced.Failed()
			return res, b.errorf("check canary: %w", err)
		}
		if !ok {
			full, res.FullReason = true, "chain "+ChainCanary+" is gone from table mangle"
		}
	}
	if b.installed == nil {
		chains, err := b.listServiceChains(ctx)
		if err != nil {
			b.synced.Failed()
			return res, b.errorf("list chains: %w", err)
		}
		b.installed = chains
	}

	start := time.Now()
	req := Request{State: desired, Installed: b.installed}
	if !full {
		req.Changed = b.synced.Changed(desired)
	}
	b.buf.Reset()
	gres := b.gen.Generate(&b.buf, req)
	input := b.buf.Bytes()
	res.Generate = time.Since(start)
	res.Full, res.Rules, res.Bytes, res.ChangedServices = full, gres.Rules, gres.Bytes, gres.ChangedServices

	start = time.Now()
	// Legacy iptables copies the whole table on every call: ensure the jumps before the
	// restore, while a new node's tables are still small (kube-proxy's order).
	// iptables-nft-restore --noflush is slower into a table that already holds chains, and
	// a single nft call is cheap at any size: there the jumps follow the restore.
	jumpsFirst := b.opts.Flavor == FlavorLegacy
	ensure := func() error {
		cpu, err := b.ensureJumps(ctx)
		res.ApplyCPU += cpu
		if err != nil {
			res.Apply = time.Since(start)
			b.synced.Failed()
			return b.errorf("ensure jumps: %w", err)
		}
		return nil
	}
	if full && jumpsFirst {
		if err := ensure(); err != nil {
			return res, err
		}
	}
	var out execResult
	var err error
	if b.opts.WholeTableCache && b.opts.Flavor == FlavorNFT && cacheHintPays(gres, full, len(desired.Services), b.hintWork) {
		input = withCacheHint(input)
		out, err = b.runDiscarding(ctx, b.restore, input, "-w", "--noflush", "--counters")
	} else {
		out, err = b.run(ctx, b.restore, input, "-w", "--noflush", "--counters")
	}
	res.ApplyCPU += out.CPU
	if err != nil {
		res.Apply = time.Since(start)
		b.failures++
		b.synced.Failed()
		return res, b.errorf("%w", newRestoreError(err, out.Stderr, input))
	}
	if full && !jumpsFirst {
		if err := ensure(); err != nil {
			return res, err
		}
	}
	res.Apply = time.Since(start)
	b.installed = gres.Active
	if err := b.synced.Done(ctx, s, desired); err != nil {
		return res, b.errorf("%w", err)
	}
	return res, nil
}

// canaryExists checks kube-proxy's canary chain in the mangle table. Someone flushing the
// tables (a firewall reload) removes it, and the next sync must then be full.
//
// Equivalent to: `iptables -w -t mangle -S KUBE-PROXY-CANARY`.
func (b *Backend) canaryExists(ctx context.Context) (bool, error) {
	out, err := b.run(ctx, b.ipt, nil, "-w", "-t", "mangle", "-S", ChainCanary)
	if err == nil {
		return true, nil
	}
	if exitCode(err) == 1 && chainMissing(out.Stderr) {
		return false, nil
	}
	return false, err
}

// chainMissing reports whether iptables's stderr says a listed chain does not exist:
// legacy prints "No chain/target/match by that name", iptables-nft 1.8.9 the same or,
// when the table itself is missing, "chain `X' in table `T' is incompatible". Exit
// status 1 alone says only "an error": taking every exit 1 for a vanished canary would
// turn any failed listing into a silent full sync.
func chainMissing(stderr []byte) bool {
	return bytes.Contains(stderr, []byte("No chain/target/match by that name")) ||
		bytes.Contains(stderr, []byte("is incompatible"))
}

// listServiceChains returns the per-service nat chains in the kernel (leftovers of an earlier
// run are deleted by the first sync, as kube-proxy does).
//
// Equivalent to: `iptables-save -t nat | grep '^:KUBE-\(SVC\|SVL\|EXT\|FW\|SEP\)-'`.
func (b *Backend) listServiceChains(ctx context.Context) (map[string]struct{}, error) {
	tables, err := b.listChains(ctx, "nat")
	if err != nil {
		return nil, err
	}
	chains := map[string]struct{}{}
	for _, c := range tables {
		if IsServiceChain(c) {
			chains[c] = struct{}{}
		}
	}
	return chains, nil
}

// listChains returns the chains of table as iptables-save prints them.
func (b *Backend) listChains(ctx context.Context, table string) ([]string, error) {
	out, err := b.run(ctx, b.save, nil, "-t", table)
	if err != nil {
		return nil, err
	}
	var chains []string
	sc := bufio.NewScanner(bytes.NewReader(out.Stdout))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, ":") {
			name, _, _ := strings.Cut(line[1:], " ")
			chains = append(chains, name)
		}
	}
	return chains, sc.Err()
}

// ensureJumps makes the built-in chains jump into kube-proxy's, as kube-proxy does on a full
// sync (EnsureChain, then EnsureRule(Prepend, ...)): create the target chain, check the
// jump, and insert it at the top when missing. Partial syncs skip it, as kube-proxy's do.
//
// Equivalent to: `iptables -w -t $table -N $target; iptables -w -t $table -C $chain $args ||
// iptables -w -t $table -I $chain $args`.
func (b *Backend) ensureJumps(ctx context.Context) (time.Duration, error) {
	var cpu time.Duration
	type tc struct{ table, chain string }
	created := map[tc]bool{}
	for _, j := range Jumps() {
		if created[tc{j.Table, j.To}] {
			continue
		}
		created[tc{j.Table, j.To}] = true
		out, err := b.run(ctx, b.ipt, nil, "-w", "-t", j.Table, "-N", j.To)
		cpu += out.CPU
		if err != nil && exitCode(err) != 1 { // 1: the chain exists
			return cpu, err
		}
	}
	for _, j := range Jumps() {
		args := append([]string{"-w", "-t", j.Table, "-C", j.From}, j.Args()...)
		out, err := b.run(ctx, b.ipt, nil, args...)
		cpu += out.CPU
		if err == nil {
			continue
		}
		if exitCode(err) != 1 {
			return cpu, err
		}
		ins := append([]string{"-w", "-t", j.Table, "-I", j.From}, j.Args()...)
		out, err = b.run(ctx, b.ipt, nil, ins...)
		cpu += out.CPU
		if err != nil {
			return cpu, err
		}
	}
	return cpu, nil
}

// Cleanup removes the jumps and every KUBE-* chain of the filter, nat and mangle tables, like
// `kube-proxy --cleanup`. The next Sync is full.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.synced.Reset()
	b.installed = nil
	var errs []error
	for _, j := range Jumps() {
		for range 16 { // delete duplicates too, but never loop forever
			args := append([]string{"-w", "-t", j.Table, "-D", j.From}, j.Args()...)
			if _, err := b.run(ctx, b.ipt, nil, args...); err != nil {
				if c := exitCode(err); c != 1 && c != 2 {
					errs = append(errs, err)
				}
				break
			}
		}
	}
	var in bytes.Buffer
	for _, table := range []string{"filter", "nat", "mangle"} {
		chains, err := b.listChains(ctx, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var ours []string
		for _, c := range chains {
			if strings.HasPrefix(c, "KUBE-") {
				ours = append(ours, c)
			}
		}
		if len(ours) == 0 {
			continue
		}
		in.WriteString("*" + table + "\n")
		for _, c := range ours {
			chainLine(&in, c)
		}
		for _, c := range ours {
			in.WriteString("-X " + c + "\n")
		}
		in.WriteString("COMMIT\n")
	}
	if in.Len() > 0 {
		if out, err := b.run(ctx, b.restore, in.Bytes(), "-w", "--noflush"); err != nil {
			errs = append(errs, newRestoreError(err, out.Stderr, in.Bytes()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup %s %s: %w", b.opts.NodeName, b.Name(), err)
	}
	return nil
}
