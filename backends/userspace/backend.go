//go:build linux

// Package userspace is kube-proxy's original proxy mode ("userspace", removed in Kubernetes
// 1.26): a proxy in this process accepts every connection for a Service and opens a second
// one to an endpoint, and nat rules REDIRECT service traffic to the proxy's listeners.
//
// For every service port, Sync opens a listener inside the node's network namespace
// (0.0.0.0:<random port>, TCP or UDP; created on a thread inside the namespace with
// internal/netns.Do, served by ordinary goroutines afterwards) and writes, with one
// `iptables-restore --noflush` (iptables-nft) per changed ruleset, the chains of kube-proxy's
// userspace mode:
//
//	nat PREROUTING -> KUBE-PORTALS-CONTAINER, KUBE-NODEPORT-CONTAINER  (REDIRECT to the proxy)
//	nat OUTPUT     -> KUBE-PORTALS-HOST, KUBE-NODEPORT-HOST            (DNAT to nodeIP:proxyport)
//	filter INPUT, FORWARD, OUTPUT -> KUBE-PORTALS-REJECT               (REJECT without endpoints)
//
// The proxy picks endpoints round-robin per service port, with ClientIP affinity when the
// Service asks for it, and dials them from the node namespace through a small pool of
// internal/netns.Workers. A failed connect is retried on the next endpoint with growing timeouts
// (kube-proxy's 250ms, 500ms, 1s, 2s). TCP bytes are copied both ways, half-close aware,
// until both sides have closed or the connection was idle for Options.TCPIdleTimeout. UDP
// has one session (one socket to the endpoint) per client address, closed after
// Options.UDPIdleTimeout without traffic; replies go back from the service's socket.
//
// Known limitations, as in kube-proxy's userspace mode:
//   - Endpoints see the node's address as the client: the source IP is lost, so
//     externalTrafficPolicy: Local cannot keep it. There is one listener per service port,
//     which cannot tell how traffic entered, so a port with a Cluster path uses its cluster
//     endpoints for all traffic, and Local policies only apply when no Cluster path exists.
//   - Only TCP and UDP; SCTP service ports are ignored. LoadBalancerSourceRanges and health
//     check node ports are not implemented.
//   - Every byte crosses this process twice: throughput and latency are far worse than in the
//     kernel modes (see BenchmarkProxy).
//
// What clients see for a service port without endpoints: a REJECT rule in the filter table
// (the nat redirect is not written), so a TCP connect fails at once with "connection
// refused" and UDP gets an ICMP port unreachable, as kube-proxy's iptables mode does. When
// endpoints exist but a Local policy leaves none for the node, packets are dropped.
package userspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"sync"
	"time"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/synced"
	"kpbench.dev/kpbench/internal/netns"
)

// Defaults of Options.
const (
	// DefaultTCPIdleTimeout closes proxied TCP connections silent in both directions for
	// this long.
	DefaultTCPIdleTimeout = 10 * time.Minute
	// DefaultUDPIdleTimeout closes UDP sessions without traffic for this long. kube-proxy's
	// --udp-timeout defaulted to 250ms in userspace mode; a longer default keeps request and
	// answer of slow UDP servers on one session.
	DefaultUDPIdleTimeout = 10 * time.Second
	// DefaultDialWorkers is the number of endpoint connects in flight at once.
	DefaultDialWorkers = 4
	// DefaultAffinityTimeout is kube-proxy's sessionAffinity ClientIP timeout (10800s), used
	// when a service port does not set one.
	DefaultAffinityTimeout = 10800 * time.Second
)

// DefaultDialTimeouts are kube-proxy's userspace EndpointDialTimeouts: one connect attempt
// per entry, each on the next endpoint.
func DefaultDialTimeouts() []time.Duration {
	return []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
}

// Options configure a Backend. Zero values take the defaults.
type Options struct {
	// NodeName names the node in errors.
	NodeName string
	// NetNSPath is the node's network namespace: listeners, endpoint connections and
	// iptables all live there. Required.
	NetNSPath string
	// ToolRoot is a prepared root directory that iptables runs from, chrooted
	// (netns.Tools); empty: the host's.
	ToolRoot string
	// LockFile is exported as XTABLES_LOCKFILE to iptables ("" keeps the default).
	LockFile string
	// HostIP is the address traffic of the node itself is DNATed to (the proxy listens on
	// every address). Invalid: the first of State.NodeIPs, and with none, REDIRECT
	// (127.0.0.1), which works for TCP only.
	HostIP netip.Addr
	// TCPIdleTimeout, UDPIdleTimeout: see the defaults.
	TCPIdleTimeout, UDPIdleTimeout time.Duration
	// DialTimeouts are the connect attempts to endpoints, each on the next endpoint
	// (default DefaultDialTimeouts).
	DialTimeouts []time.Duration
	// DialWorkers is the number of locked threads in the node namespace that connect to
	// endpoints (default DefaultDialWorkers).
	DialWorkers int
}

// Backend is the "userspace" proxy mode of one node. It is safe for concurrent use; syncs
// are serialised.
type Backend struct {
	opts Options
	exec execer
	now  func() time.Time

	mu        sync.Mutex
	synced    *synced.FullSync // the proxy holds its own state; no conntrack to clean
	services  map[backends.ServicePortName]*service
	lastRules []byte
	dialer    *dialer
}

var _ backends.Backend = (*Backend)(nil)

// New returns a Backend for one node. Nothing is opened and no rule written until the first
// Sync, which is full.
func New(opts Options) (*Backend, error) {
	if opts.NetNSPath == "" {
		return nil, fmt.Errorf("userspace backend for node %q: no NetNSPath", opts.NodeName)
	}
	// One descriptor per service port and two per connection: 20,000 Services exceed
	// the usual limit. A failure here shows later, as "too many open files" in Sync.
	_ = raiseOpenFiles()
	if opts.TCPIdleTimeout <= 0 {
		opts.TCPIdleTimeout = DefaultTCPIdleTimeout
	}
	if opts.UDPIdleTimeout <= 0 {
		opts.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if len(opts.DialTimeouts) == 0 {
		opts.DialTimeouts = DefaultDialTimeouts()
	}
	if opts.DialWorkers <= 0 {
		opts.DialWorkers = DefaultDialWorkers
	}
	return &Backend{
		opts:     opts,
		exec:     netns.Tools{NSPath: opts.NetNSPath, Root: opts.ToolRoot},
		now:      time.Now,
		synced:   &synced.FullSync{},
		services: map[backends.ServicePortName]*service{},
	}, nil
}

// Name returns "userspace".
func (b *Backend) Name() string { return "userspace" }

// ForceFullSync makes the next Sync rewrite the rules and check the jumps.
func (b *Backend) ForceFullSync() { b.synced.ForceFullSync() }

// ProxyPort returns the port of the proxy listener of a service port in the node namespace
// (false when the port is not proxied).
func (b *Backend) ProxyPort(name backends.ServicePortName) (uint16, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.services[name]
	if !ok {
		return 0, false
	}
	return s.port, true
}

func (b *Backend) errorf(format string, args ...any) error {
	return fmt.Errorf("sync %s userspace: "+format, append([]any{b.opts.NodeName}, args...)...)
}

// Sync makes the proxy match desired: it opens listeners for new service ports, closes those
// of removed ones (and their connections), updates endpoints and affinity of changed ones in
// place, and rewrites the chains when the rules differ from the last applied (always on a
// full sync: the first, after an error, after ForceFullSync). Endpoint changes alone touch no
// rule, unless a port gains its first or loses its last endpoint.
func (b *Backend) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.synced.Begin()
	res := backends.SyncResult{Full: s.Full}
	start := time.Now()
	if b.dialer == nil {
		d, err := startDialer(b.opts.NetNSPath, b.opts.DialWorkers)
		if err != nil {
			return res, b.errorf("%w", err)
		}
		b.dialer = d
	}

	want := make(map[backends.ServicePortName]*backends.ServicePort, len(desired.Services))
	for _, sp := range desired.Services {
		if sp.Protocol() == backends.TCP || sp.Protocol() == backends.UDP {
			want[sp.Name] = sp
		}
	}
	for name, s := range b.services {
		if _, ok := want[name]; !ok {
			s.close()
			delete(b.services, name)
			res.ChangedServices++
		}
	}
	var added []*service
	for _, sp := range desired.Services {
		if want[sp.Name] == nil {
			continue
		}
		s, ok := b.services[sp.Name]
		if !ok {
			added = append(added, b.newService(sp))
			continue
		}
		if !s.sp.Equal(sp) {
			s.update(sp)
			res.ChangedServices++
		}
	}
	if err := checkDescriptors(len(added)); err != nil {
		return res, b.errorf("%d new service ports: %w", len(added), err)
	}
	if err := b.listen(ctx, added); err != nil {
		b.synced.Failed()
		return res, b.errorf("%w", err)
	}
	for _, s := range added {
		b.services[s.name] = s
		s.serve()
		res.ChangedServices++
	}

	hostIP := b.opts.HostIP
	if !hostIP.IsValid() && len(desired.NodeIPs) > 0 {
		hostIP = desired.NodeIPs[0]
	}
	portals := make([]Portal, 0, len(b.services))
	for _, sp := range desired.Services {
		if s := b.services[sp.Name]; s != nil {
			portals = append(portals, Portal{Service: s.sp, ProxyPort: s.port, Action: s.action})
		}
	}
	var buf bytes.Buffer
	g := Generate(&buf, portals, hostIP)
	res.Generate = time.Since(start)
	if !res.Full && bytes.Equal(buf.Bytes(), b.lastRules) {
		b.synced.Succeeded(s)
		return res, nil
	}

	start = time.Now()
	res.Rules, res.Bytes = g.Rules, g.Bytes
	_, err := b.iptables(ctx, buf.Bytes(), "iptables-nft-restore", "-w", "--noflush")
	if err == nil && res.Full {
		err = b.ensureJumps(ctx)
	}
	res.Apply = time.Since(start)
	if err != nil {
		b.synced.Failed()
		b.lastRules = nil
		return res, b.errorf("%w", err)
	}
	b.lastRules = slices.Clone(buf.Bytes())
	b.synced.Succeeded(s)
	return res, nil
}

// listen opens the listeners of added services in the node namespace, all on one locked
// thread. On error none of them stays open.
func (b *Backend) listen(ctx context.Context, added []*service) error {
	if len(added) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := netns.Do(b.opts.NetNSPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		for _, s := range added {
			if err := s.listen(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, s := range added {
			s.close()
		}
		return fmt.Errorf("open proxy listeners in %s: %w", b.opts.NetNSPath, err)
	}
	return nil
}

// iptables runs an iptables tool in the node namespace.
func (b *Backend) iptables(ctx context.Context, stdin []byte, path string, args ...string) (netns.Result, error) {
	cmd := netns.Command{Path: path, Args: args, Stdin: stdin}
	if b.opts.LockFile != "" {
		cmd.Env = []string{"XTABLES_LOCKFILE=" + b.opts.LockFile}
	}
	return b.exec.Exec(ctx, cmd)
}

// ensureJumps appends the jumps of Jumps to the built-in chains unless they are there.
//
// Equivalent to: `iptables -w -t $table -C $from -j $to || iptables -w -t $table -A $from -j $to`.
func (b *Backend) ensureJumps(ctx context.Context) error {
	for _, j := range Jumps() {
		_, err := b.iptables(ctx, nil, "iptables-nft", "-w", "-t", j.Table, "-C", j.From, "-j", j.To)
		if err == nil {
			continue
		}
		if exitCode(err) != 1 {
			return fmt.Errorf("check jump %s %s -> %s: %w", j.Table, j.From, j.To, err)
		}
		if _, err := b.iptables(ctx, nil, "iptables-nft", "-w", "-t", j.Table, "-A", j.From, "-j", j.To); err != nil {
			return fmt.Errorf("add jump %s %s -> %s: %w", j.Table, j.From, j.To, err)
		}
	}
	return nil
}

// Cleanup closes every listener and proxied connection, stops the dialing threads, and
// removes the jumps and chains. The next Sync is full.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, s := range b.services {
		s.close()
		delete(b.services, name)
	}
	if b.dialer != nil {
		b.dialer.stop()
		b.dialer = nil
	}
	b.synced.Failed()
	b.lastRules = nil
	var errs []error
	for _, j := range Jumps() {
		for range 16 { // duplicates too, but never forever
			if _, err := b.iptables(ctx, nil, "iptables-nft", "-w", "-t", j.Table, "-D", j.From, "-j", j.To); err != nil {
				if c := exitCode(err); c != 1 && c != 2 {
					errs = append(errs, fmt.Errorf("delete jump %s %s -> %s: %w", j.Table, j.From, j.To, err))
				}
				break
			}
		}
	}
	if _, err := b.iptables(ctx, CleanupInput(), "iptables-nft-restore", "-w", "--noflush"); err != nil {
		errs = append(errs, fmt.Errorf("delete chains: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup %s userspace: %w", b.opts.NodeName, err)
	}
	return nil
}

// execer runs a tool inside the node namespace: netns.Tools (the host's tools or a tool
// root's); unit tests replace it.
type execer interface {
	Exec(ctx context.Context, cmd netns.Command) (netns.Result, error)
}

// exitCode returns the exit status of a failed tool, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
