//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/synced"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/proc"
)

// Options describe one node's upstream kube-proxy.
type Options struct {
	// Name is the backend's name ("" means kube-proxy-<mode>); a variant's full reference
	// (kube-proxy-nftables@v1.34.0), so results and errors say which binary ran.
	Name string
	// Binary is the path of the kube-proxy binary; Config.Version says which release it is.
	Binary string
	// NetNSPath is the node's namespace.
	NetNSPath string
	// StateDir receives the generated configuration and the log
	// (kube-proxy-<node>.yaml, kube-proxy-<node>.log).
	StateDir string
	// Config is the kube-proxy configuration (mode, node, kubeconfig, periods).
	Config Config
	// WaitPublished, when set, blocks until every object of the lab's store is in the API
	// server (the testbed's publisher); Sync calls it before it waits for kube-proxy.
	WaitPublished func(ctx context.Context) error
	// SyncTimeout bounds how long one Sync waits for kube-proxy (default 30 minutes: a
	// full iptables sync of 20,000 Services takes minutes, as iptables-nft 1.8.9's restore
	// is quadratic in the chains it names; docs/findings.md, "`make bench`, 2026-12-02").
	SyncTimeout time.Duration
	// Settle is how long a change may take to reach kube-proxy's informers after it was
	// published, and so how long a Sync whose change kube-proxy ignores waits (default
	// 500ms plus minSyncPeriod).
	Settle time.Duration
}

// Backend runs upstream kube-proxy on one node (see the package documentation).
type Backend struct {
	opts   Options
	client *http.Client

	mu        sync.Mutex
	proc      *proc.Process
	prev      Samples // scrape at the end of the previous Sync
	prevAt    time.Time
	lastStart float64         // estimated start (unix seconds) of kube-proxy's latest finished sync
	lastDur   float64         // its duration (seconds), when one sync ended between two scrapes
	services  map[string]bool // the Services ("ns/name") of the previous Sync's desired state
	full      synced.FullSync // a full sync is a new process (ForceFullSync)
	cfgPath   string
	logPath   string
}

// New returns a backend for one node; kube-proxy starts at the first Sync.
func New(o Options) (*Backend, error) {
	if o.Binary == "" {
		return nil, errors.New("kube-proxy: no binary (build it with `make upstream`)")
	}
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("kube-proxy binary: %w (build it with `make upstream`)", err)
	}
	if !o.Config.Mode.Valid() {
		return nil, fmt.Errorf("kube-proxy: unknown mode %q", o.Config.Mode)
	}
	if err := o.Config.CheckVersion(); err != nil {
		return nil, err
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = 30 * time.Minute
	}
	if o.Settle == 0 {
		o.Settle = 500*time.Millisecond + max(o.Config.MinSyncPeriod, 0)
		if o.Config.MinSyncPeriod == 0 {
			o.Settle += time.Second // kube-proxy's default minSyncPeriod
		}
	}
	b := &Backend{opts: o}
	b.cfgPath = filepath.Join(o.StateDir, "kube-proxy-"+o.Config.NodeName+".yaml")
	b.logPath = filepath.Join(o.StateDir, "kube-proxy-"+o.Config.NodeName+".log")
	b.client = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext:       b.dialInNode,
		},
	}
	return b, nil
}

// Name returns Options.Name, by default kube-proxy-<mode>.
func (b *Backend) Name() string {
	if b.opts.Name != "" {
		return b.opts.Name
	}
	return "kube-proxy-" + string(b.opts.Config.Mode)
}

// LogPath returns the path of kube-proxy's log.
func (b *Backend) LogPath() string { return b.logPath }

// NeedsAPIServer reports that this backend reads the lab's API server (see backends/all).
func (b *Backend) NeedsAPIServer() bool { return true }

// ForceFullSync makes the next Sync restart kube-proxy, whose first sync is always full.
func (b *Backend) ForceFullSync() { b.full.ForceFullSync() }

// dialInNode opens the TCP connection from a thread inside the node's namespace; the
// socket stays there.
func (b *Backend) dialInNode(ctx context.Context, network, addr string) (net.Conn, error) {
	return netns.Dial(ctx, b.opts.NetNSPath, &net.Dialer{}, network, addr)
}

// Scrape reads kube-proxy's /metrics from inside the node's namespace.
func (b *Backend) Scrape(ctx context.Context) (Samples, error) {
	url := "http://" + netip.AddrPortFrom(b.opts.Config.NodeIP, MetricsPort).String() + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// start writes the configuration and starts kube-proxy. Call with b.mu held.
func (b *Backend) start() error {
	cfg, err := b.opts.Config.Render()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.opts.StateDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(b.cfgPath, cfg, 0o644); err != nil {
		return err
	}
	if err := singleStack(b.opts.NetNSPath); err != nil {
		return err
	}
	p, err := startIn(b.opts.NetNSPath, b.opts.Binary, []string{"--config", b.cfgPath, "--v=2"}, b.logPath)
	if err != nil {
		return err
	}
	b.proc, b.prev, b.prevAt, b.lastStart = p, nil, time.Now(), 0
	return nil
}

// singleStack disables IPv6 in the node's namespace (the lab is IPv4-only), so that
// kube-proxy runs one proxier, for IPv4, as on a node whose kernel has IPv6 disabled
// (kube-proxy reads /proc/sys/net/ipv6/conf/all/disable_ipv6 at start).
//
// Dual-stack, the wait could not trust kube-proxy's pending-change gauges: v1.37's
// ...changes_pending gauges have no IP-family label and both families' change trackers
// write them. A Service change that arrives during an IPv4 sync sets the Service gauge to
// 1 and the IPv6 tracker, which filters the IPv4 Service out, sets it straight back to 0
// (servicechangetracker.go: Set(len(items))); the IPv6 sync that follows each IPv4 one
// zeroes the EndpointSlice gauge likewise. The change then looked programmed by a sync
// that had begun before it arrived, and diff-rules dumped upstream's rules without the
// case's Service (5 runs of 10 of headless-label).
//
// Equivalent to: `ip netns exec $ns sysctl -w net.ipv6.conf.all.disable_ipv6=1`.
func singleStack(nsPath string) error {
	const key = "/proc/sys/net/ipv6/conf/all/disable_ipv6"
	return netns.Do(nsPath, func() error {
		if err := os.WriteFile(key, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disable IPv6 for a single-stack kube-proxy: %w", err)
		}
		return nil // no IPv6 in the kernel: kube-proxy is single-stack anyway
	})
}

// Sync waits until kube-proxy has programmed what the API server holds: desired is not
// used (kube-proxy reads the same objects from the API server). See the package documentation for the wait rule and the mapping of
// kube-proxy's metrics onto the result.
func (b *Backend) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	node := b.opts.Config.NodeName
	s := b.full.Begin() // full before the first start too: then there is no process yet
	if s.Full && b.proc != nil {
		if err := b.proc.Stop(ctx, 10*time.Second); err != nil {
			return backends.SyncResult{}, fmt.Errorf("restart kube-proxy on %s: %w", node, err)
		}
		b.proc = nil
	}
	b.full.Succeeded(s) // the restart asked for is done, whatever follows
	if b.proc == nil {
		if err := b.start(); err != nil {
			return backends.SyncResult{}, fmt.Errorf("kube-proxy on %s: %w", node, err)
		}
	}
	if b.opts.WaitPublished != nil {
		if err := b.opts.WaitPublished(ctx); err != nil {
			return backends.SyncResult{}, fmt.Errorf("kube-proxy on %s: publish to the API server: %w", node, err)
		}
	}
	published := time.Now()
	services := serviceSet(desired)
	servicesChanged := desired != nil && !maps.Equal(services, b.services)
	ctx, cancel := context.WithTimeout(ctx, b.opts.SyncTimeout)
	defer cancel()
	var cur Samples
	var scrapeErr error
	var doneSince time.Time // first of the consecutive scrapes that said "done"
	var doneCount float64   // kube-proxy's sync count in those scrapes
	prevScrape, prevScrapeAt := b.prev, b.prevAt
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if done, err := b.proc.Exited(); done {
			b.proc = nil
			return backends.SyncResult{}, fmt.Errorf("kube-proxy on %s exited: %v; log %s:\n%s", node, err, b.logPath, tailFile(b.logPath, 20))
		}
		cur, scrapeErr = b.Scrape(ctx)
		if scrapeErr == nil {
			b.lastStart = syncStart(prevScrape, prevScrapeAt, cur, b.lastStart)
			if delta(cur, prevScrape, MetricSyncDuration+"_count") == 1 {
				b.lastDur = delta(cur, prevScrape, MetricSyncDuration+"_sum")
			}
			prevScrape, prevScrapeAt = cur, time.Now()
		}
		if scrapeErr == nil && b.done(cur, published, servicesChanged) {
			// A sync that ends during the quiet period starts it again: one that began
			// just before a change arrived may be followed by the one that carries it.
			if n := cur[MetricSyncDuration+"_count"]; doneSince.IsZero() || n != doneCount {
				doneSince, doneCount = time.Now(), n
			}
			if time.Since(doneSince) >= b.quietFor(cur) {
				break
			}
		} else {
			doneSince = time.Time{}
		}
		select {
		case <-ctx.Done():
			return backends.SyncResult{}, errors.Join(fmt.Errorf("kube-proxy on %s: not synced after %s (log %s):\n%s", node, time.Since(published).Round(time.Millisecond), b.logPath, tailFile(b.logPath, 20)), scrapeErr, ctx.Err())
		case <-tick.C:
		}
	}
	res := backends.SyncResult{
		Full:  delta(cur, b.prev, MetricSyncFull+"_count") > 0 || b.prev == nil,
		Apply: time.Duration(delta(cur, b.prev, MetricSyncDuration+"_sum") * float64(time.Second)),
		Rules: int(cur[MetricIPTablesTotal]),
		// Everything after kube-proxy's own end of the sync was waiting and confirming;
		// programmedAt is never before the publication, so never before this call.
		Confirm: max(time.Since(programmedAt(cur, published)), 0),
	}
	b.prev, b.prevAt, b.services = cur, prevScrapeAt, services
	return res, nil
}

// serviceSet returns the Services ("namespace/name") of a desired state; nil for none.
func serviceSet(st *backends.State) map[string]bool {
	if st == nil {
		return nil
	}
	out := make(map[string]bool, len(st.Services))
	for _, sp := range st.Services {
		out[sp.Name.Namespace+"/"+sp.Name.Name] = true
	}
	return out
}

// programmedAt is when kube-proxy had put in place what was published at published: the
// end of its latest sync, kube-proxy's last-sync timestamp, which it sets once the kernel
// has taken the rules, right after it observed its own network programming latency (the
// wait above ends only when that sync carried the change); or the publication itself when
// no sync ended after it (kube-proxy had nothing to change). Dating the end this way, and
// not by the scrape that first showed it, keeps the wait's scrape interval, quiet period
// and slow path out of upstream's programming latency.
func programmedAt(s Samples, published time.Time) time.Time {
	end := time.Unix(0, int64(s[MetricLastSync]*1e9)) // absent: 1970, before published
	if end.Before(published) {
		return published
	}
	return end
}

// quietPeriod is how long scrapes must keep saying "done", with no sync ending, before
// Sync believes them: the objects of one change (a Service and its EndpointSlice, say)
// reach kube-proxy's informers one by one, milliseconds apart, and a sync for the first
// may end before the second arrives. The quiet period, like all of the wait after
// kube-proxy's sync ended, is reported as SyncResult.Confirm (see programmedAt), so that it
// does not count as upstream's programming latency.
const quietPeriod = 150 * time.Millisecond

// quietFor is how long scrapes like s must agree. When the start estimate of the last
// sync lies within startSlack before the last queued change, that sync may have begun just
// before the change arrived, and the sync that carries it may be running already (with no
// pending change left to show it): the quiet period then also covers two more syncs of
// the last one's duration, so that such a follow-up ends, and is judged, inside it.
func (b *Backend) quietFor(s Samples) time.Duration {
	if s.Has(MetricLastQueued) && b.lastStart < s[MetricLastQueued] {
		return quietPeriod + time.Duration(2*b.lastDur*float64(time.Second))
	}
	return quietPeriod
}

// startSlack is how much earlier than its true start syncStart may place a sync.
// kube-proxy sets its last-sync timestamp before the end of syncProxyRules (health
// servers and conntrack cleanup follow) and observes the duration at the very end, so
// timestamp minus duration falls before the start; measured here 0.6 ms for a partial
// nftables sync of 200 Services, while a sync triggered by a change starts microseconds
// after kube-proxy queued it. Without the slack every such sync looked as if it had
// started before the change and the wait fell back to its slow path (4.67 s).
const startSlack = 5 * time.Millisecond

// syncStart estimates when kube-proxy's latest finished sync started (unix seconds), from
// two consecutive scrapes (prev taken at prevAt) and the previous estimate: exactly one
// sync between them lasted Δ of the duration histogram's sum and ended at the last-sync
// timestamp; after two or more, the latest started after prev was taken (only one sync
// runs at a time); after none, the estimate stands.
func syncStart(prev Samples, prevAt time.Time, cur Samples, est float64) float64 {
	n := delta(cur, prev, MetricSyncDuration+"_count")
	switch {
	case n == 0:
		return est
	case n == 1:
		return cur[MetricLastSync] - delta(cur, prev, MetricSyncDuration+"_sum")
	default:
		return max(est, float64(prevAt.UnixNano())/1e9)
	}
}

// done reports whether a scrape shows kube-proxy caught up with everything published at
// published:
//   - it has synced at least once, and no change it received is pending, and
//   - either a sync ended after the publication, started after the last change was
//     queued (see syncStart), and kube-proxy received changes since the previous Sync
//     (it saw and programmed this one; when servicesChanged, the set of Services did, and
//     a Service change must be among them: a Service and its EndpointSlice come through
//     separate informers, and a sync for the slice alone programs nothing for a Service
//     kube-proxy has not seen yet), or Settle has passed since the
//     publication without a change queued after the last sync started (kube-proxy
//     ignored the change: nothing it programs changed), or, 3 x Settle after it, without
//     a change queued after the last sync ended (the start estimate can lag).
//
// Scrapes must agree for quietPeriod, so a change still on its way through the watch is
// not taken for programmed.
func (b *Backend) done(s Samples, published time.Time, servicesChanged bool) bool {
	if s[MetricSyncDuration+"_count"] == 0 || s.pending() > 0 {
		return false
	}
	last := s[MetricLastSync]
	pub := float64(published.UnixNano()) / 1e9
	// kube-proxy empties its pending changes when a sync starts, so a change received
	// during a sync is in neither that sync nor the pending count: the sync that carries
	// it must have started after it was queued.
	queuedBeforeStart := !s.Has(MetricLastQueued) || b.lastStart >= s[MetricLastQueued]-startSlack.Seconds()
	received := b.prev == nil || (s.changes() > b.prev.changes() &&
		(!servicesChanged || s[MetricServicesTotal] > b.prev[MetricServicesTotal]))
	if last >= pub && queuedBeforeStart && received {
		return true
	}
	if time.Since(published) < b.opts.Settle {
		return false
	}
	if !s.Has(MetricLastQueued) || s[MetricLastQueued] <= b.lastStart {
		return true
	}
	// The start estimate can lag (a failed sync moves the count but not the timestamp):
	// long after the publication, with nothing pending, a sync that ended after the last
	// queued change is taken as its sync, as kube-proxy's own healthz does.
	return time.Since(published) >= 3*b.opts.Settle && s[MetricLastQueued] <= last
}

// Close stops kube-proxy (SIGTERM, then SIGKILL after 10 s) and leaves its rules in place
// (the lab's teardown removes them with the namespace). The next Sync would start it again.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return nil
	}
	err := b.proc.Stop(ctx, 10*time.Second)
	b.proc = nil
	if err != nil {
		return fmt.Errorf("stop kube-proxy on %s: %w", b.opts.Config.NodeName, err)
	}
	return nil
}

// Cleanup stops kube-proxy (SIGTERM, then SIGKILL after 10 s) and removes its rules with
// `kube-proxy --cleanup` in the node's namespace.
//
// Equivalent to: `kill $pid; ip netns exec $ns kube-proxy --cleanup --config $cfg`.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	if b.proc != nil {
		errs = append(errs, b.proc.Stop(ctx, 10*time.Second))
		b.proc = nil
	}
	if _, err := os.Stat(b.cfgPath); err == nil {
		_, err := netns.Exec(ctx, b.opts.NetNSPath, netns.Command{Path: b.opts.Binary, Args: []string{"--cleanup", "--config", b.cfgPath}})
		if err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup on %s: %w", b.opts.Config.NodeName, err))
		}
	}
	return errors.Join(errs...)
}
