//go:build linux

package ipvs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	mipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/backends/synced"
	"kpbench.dev/kpbench/internal/netns"
)

// ErrNoIPVS is returned by New and Probe when the node's kernel has no IPVS. Callers (tests,
// scenario runs) may turn it into a skip.
var ErrNoIPVS = errors.New("kernel has no IPVS (run it with `kpbench vm run`)")

// Options configure a Backend.
type Options struct {
	// NodeName names the node in errors.
	NodeName string
	// NetNSPath is the node's network namespace (/run/netns/<name>).
	NetNSPath string
	// ToolRoot is a prepared root directory that ipset and iptables run from, chrooted
	// (netns.Tools); empty: the host's.
	ToolRoot string
	// Scheduler is the IPVS scheduler of every virtual server ("" = rr); see Schedulers.
	Scheduler string
	// StrictARP sets arp_ignore=1 and arp_announce=2, so the node does not answer ARP for
	// the addresses on kube-ipvs0 (kube-proxy's ipvs.strictARP, needed by MetalLB).
	StrictARP bool
	// MasqueradeBit is the bit of KUBE-MARK-MASQ (0: DefaultMasqueradeBit, 0x4000).
	MasqueradeBit int
}

// execer runs a tool inside the node's namespace; the real one is netns.Tools (the host's
// tools or a tool root's).
type execer interface {
	Exec(ctx context.Context, cmd netns.Command) (netns.Result, error)
}

// Backend is the "ipvs" proxy mode for one node. It is safe for concurrent use (syncs are
// serialised). Close releases its netlink sockets.
type Backend struct {
	opts     Options
	exec     execer
	ipvs     *mipvs.Handle
	nl       *netlink.Handle
	mu       sync.Mutex
	synced   *synced.Tracker
	lastSets Sets
	lastCfg  RulesConfig
	weights  map[netip.Addr]int // experiment overrides, see SetWeights
}

var _ backends.Backend = (*Backend)(nil)

// Probe checks that the kernel of the namespace at nsPath has IPVS: it asks the generic
// netlink controller, from a socket opened in that namespace, for the "IPVS" family. It
// returns ErrNoIPVS when the family is absent.
//
// Equivalent to: `ip netns exec $ns genl ctrl get name IPVS`.
func Probe(nsPath string) error {
	ns, err := vnetns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("probe ipvs: open netns %s: %w", nsPath, err)
	}
	defer ns.Close()
	h, err := genlHandle(ns)
	if err != nil {
		return fmt.Errorf("probe ipvs: netlink handle in %s: %w", nsPath, err)
	}
	defer h.Close()
	if _, err := h.GenlFamilyGet("IPVS"); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return ErrNoIPVS
		}
		return fmt.Errorf("probe ipvs in %s: %w", nsPath, err)
	}
	return nil
}

// genlHandle opens a generic netlink socket in ns. In the caller's own namespace it opens
// it directly: entering a namespace, even one's own, needs CAP_SYS_ADMIN, and asking
// whether the kernel has IPVS needs no privilege (`kpbench validate` asks without root).
func genlHandle(ns vnetns.NsHandle) (*netlink.Handle, error) {
	if cur, err := vnetns.Get(); err == nil {
		defer cur.Close()
		if cur.Equal(ns) {
			return netlink.NewHandle(unix.NETLINK_GENERIC)
		}
	}
	return netlink.NewHandleAt(ns, unix.NETLINK_GENERIC)
}

// New returns a Backend for one node. It rejects unknown schedulers, then probes the
// node's kernel for IPVS (ErrNoIPVS when absent) and opens an IPVS and an rtnetlink handle
// bound to the node's namespace. Nothing is written until the first Sync, which is full.
func New(opts Options) (*Backend, error) {
	if opts.Scheduler == "" {
		opts.Scheduler = DefaultScheduler
	}
	if !ValidScheduler(opts.Scheduler) {
		return nil, fmt.Errorf("ipvs backend for %s: unknown scheduler %q (want one of %s)", opts.NodeName, opts.Scheduler, strings.Join(Schedulers(), ", "))
	}
	if opts.MasqueradeBit == 0 {
		opts.MasqueradeBit = DefaultMasqueradeBit
	}
	if opts.MasqueradeBit < 0 || opts.MasqueradeBit > 31 {
		return nil, fmt.Errorf("ipvs backend for %s: masquerade bit %d out of 0..31", opts.NodeName, opts.MasqueradeBit)
	}
	if err := Probe(opts.NetNSPath); err != nil {
		return nil, err
	}
	b := &Backend{opts: opts, exec: netns.Tools{NSPath: opts.NetNSPath, Root: opts.ToolRoot}, synced: synced.New(conntrack.Namespace{Path: opts.NetNSPath})}
	var err error
	if b.ipvs, err = mipvs.New(opts.NetNSPath); err != nil {
		return nil, fmt.Errorf("ipvs backend for %s: ipvs handle: %w", opts.NodeName, err)
	}
	ns, err := vnetns.GetFromPath(opts.NetNSPath)
	if err != nil {
		b.ipvs.Close()
		return nil, fmt.Errorf("ipvs backend for %s: open netns: %w", opts.NodeName, err)
	}
	defer ns.Close()
	if b.nl, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE); err != nil {
		b.ipvs.Close()
		return nil, fmt.Errorf("ipvs backend for %s: netlink handle: %w", opts.NodeName, err)
	}
	return b, nil
}

// Name returns "ipvs".
func (b *Backend) Name() string { return "ipvs" }

// Close releases the netlink handles. The kernel state stays; see Cleanup.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ipvs.Close()
	b.nl.Close()
}

// ForceFullSync makes the next Sync full (kube-proxy's syncPeriod).
func (b *Backend) ForceFullSync() { b.synced.ForceFullSync() }

func (b *Backend) errorf(format string, args ...any) error {
	return fmt.Errorf("sync %s ipvs: "+format, append([]any{b.opts.NodeName}, args...)...)
}

// Sync makes the node's IPVS table, kube-ipvs0 addresses, ipsets and iptables ruleset match
// desired. The diff is always taken against the kernel: a full sync (the first, after an
// error or ForceFullSync) reads every virtual server and its real servers; a partial one
// reads every virtual server but the real servers only of service ports that changed since
// the last sync, and rewrites only ipsets whose entries changed. UDP conntrack entries of
// removed real servers and virtual servers are deleted afterwards (StaleUDPFlows, through
// backends/synced; a failure there leaves the next sync partial, the rules being in
// place). The sysctls and the constant iptables ruleset are written on full syncs (and
// when the cluster CIDR or masqueradeAll changes).
func (b *Backend) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.synced.Begin()
	res, flows, err := b.sync(ctx, s.Full, desired)
	if err != nil {
		b.synced.Failed()
		return res, b.errorf("%w", err)
	}
	filters := make([]conntrack.Filter, len(flows))
	for i, f := range flows {
		filters[i] = f.Filter()
	}
	start := time.Now()
	err = b.synced.DoneWith(ctx, s, desired, filters)
	res.Apply += time.Since(start)
	if err != nil {
		return res, b.errorf("%w", err)
	}
	return res, nil
}

// sync programs desired and returns the UDP conntrack entries it made stale.
func (b *Backend) sync(ctx context.Context, full bool, desired *backends.State) (backends.SyncResult, []StaleFlow, error) {
	var res backends.SyncResult
	res.Full = full

	genStart := time.Now()
	want := Build(desired, b.opts.Scheduler)
	want.ApplyWeights(b.weights)
	changedNames := b.synced.Changed(desired)
	for name := range b.synced.Removed(desired) {
		changedNames[name] = true
	}
	sets := BuildSets(desired)
	cfg := RulesConfig{ClusterCIDR: desired.ClusterCIDR, MasqueradeAll: desired.MasqueradeAll, MasqueradeBit: b.opts.MasqueradeBit}
	res.Generate += time.Since(genStart)

	applyStart := time.Now()
	if full {
		if err := b.sysctls(); err != nil {
			return res, nil, err
		}
	}
	link, err := b.ensureDummy()
	if err != nil {
		return res, nil, err
	}
	var only map[ServiceKey]bool
	if !full {
		only = map[ServiceKey]bool{}
		for k, vs := range want.Services {
			if changedNames[vs.Owner] {
				only[k] = true
			}
		}
	}
	have, err := b.readKernel(link, only)
	if err != nil {
		return res, nil, err
	}
	res.Apply += time.Since(applyStart)

	genStart = time.Now()
	plan := Diff(want, have, only)
	res.Generate += time.Since(genStart)

	applyStart = time.Now()
	if err := b.apply(link, plan, want); err != nil {
		res.Apply += time.Since(applyStart)
		return res, nil, err
	}
	if err := ctx.Err(); err != nil {
		return res, nil, err
	}

	var in strings.Builder
	var changedSets map[string]bool
	if !full {
		changedSets = sets.ChangedSets(b.lastSets)
	}
	if full || len(changedSets) > 0 {
		sets.WriteRestore(&in, changedSets)
		res.Bytes += in.Len()
		if _, err := b.exec.Exec(ctx, netns.Command{Path: "ipset", Args: []string{"restore"}, Stdin: []byte(in.String())}); err != nil {
			res.Apply += time.Since(applyStart)
			return res, nil, fmt.Errorf("ipset restore: %w", err)
		}
	}
	b.lastSets = sets
	if full || cfg != b.lastCfg {
		n, err := b.writeRules(ctx, cfg)
		res.Bytes += n
		if err != nil {
			res.Apply += time.Since(applyStart)
			return res, nil, err
		}
	}
	b.lastCfg = cfg
	flows := StaleUDPFlows(plan, want, have, only)
	res.Apply += time.Since(applyStart)

	vs, rs := want.Counts()
	res.Rules = vs + rs
	for name := range plan.Changed {
		changedNames[name] = true
	}
	res.ChangedServices = len(changedNames)
	return res, flows, nil
}

// sysctls writes the IPVS-mode sysctls inside the node's namespace.
//
// Equivalent to: `sysctl -w net.ipv4.vs.conntrack=1 net.ipv4.vs.expire_nodest_conn=1
// net.ipv4.vs.expire_quiescent_template=1 net.ipv4.ip_forward=1` (and, with StrictARP,
// `net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2`).
func (b *Backend) sysctls() error {
	vals := [][2]string{
		{"net/ipv4/vs/conntrack", "1"},
		{"net/ipv4/vs/expire_nodest_conn", "1"},
		{"net/ipv4/vs/expire_quiescent_template", "1"},
		{"net/ipv4/ip_forward", "1"},
	}
	if b.opts.StrictARP {
		vals = append(vals, [2]string{"net/ipv4/conf/all/arp_ignore", "1"}, [2]string{"net/ipv4/conf/all/arp_announce", "2"})
	}
	return netns.Do(b.opts.NetNSPath, func() error {
		for _, v := range vals {
			if err := os.WriteFile(filepath.Join("/proc/sys", v[0]), []byte(v[1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", v[0], v[1], err)
			}
		}
		return nil
	})
}

// ensureDummy returns kube-ipvs0, creating it when missing. Like kube-proxy, the device
// stays down: its addresses still get local routes, but it answers nothing by itself.
//
// Equivalent to: `ip link add kube-ipvs0 type dummy`.
func (b *Backend) ensureDummy() (netlink.Link, error) {
	link, err := b.nl.LinkByName(DummyDevice)
	if err == nil {
		return link, nil
	}
	var nf netlink.LinkNotFoundError
	if !errors.As(err, &nf) {
		return nil, fmt.Errorf("find %s: %w", DummyDevice, err)
	}
	if err := b.nl.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: DummyDevice}}); err != nil {
		return nil, fmt.Errorf("add %s: %w", DummyDevice, err)
	}
	link, err = b.nl.LinkByName(DummyDevice)
	if err != nil {
		return nil, fmt.Errorf("find %s after adding it: %w", DummyDevice, err)
	}
	return link, nil
}

// readKernel reads the current model: addresses on kube-ipvs0, every virtual server, and the
// real servers of those in only (all when only is nil).
//
// Equivalent to: `ip -4 addr show dev kube-ipvs0; ipvsadm -Ln`.
func (b *Backend) readKernel(link netlink.Link, only map[ServiceKey]bool) (*Model, error) {
	m := NewModel()
	addrs, err := b.nl.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", DummyDevice, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			m.Addrs[ip] = true
		}
	}
	svcs, err := b.ipvs.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list ipvs services: %w", err)
	}
	for _, s := range svcs {
		key, ok := keyOf(s)
		if !ok {
			continue
		}
		vs := &VirtualServer{Key: key, Scheduler: s.SchedName, Flags: s.Flags &^ FlagHashed, Timeout: s.Timeout, Dests: map[netip.AddrPort]int{}}
		m.Services[key] = vs
		if only != nil && !only[key] {
			continue
		}
		ds, err := b.ipvs.GetDestinations(s)
		if err != nil {
			return nil, fmt.Errorf("list real servers of %s: %w", key, err)
		}
		for _, d := range ds {
			ip, ok := netip.AddrFromSlice(d.Address.To4())
			if !ok {
				continue
			}
			vs.Dests[netip.AddrPortFrom(ip, d.Port)] = d.Weight
		}
	}
	return m, nil
}

// keyOf converts a kernel virtual server to its key (false for fwmark and IPv6 services,
// which this backend never creates).
func keyOf(s *mipvs.Service) (ServiceKey, bool) {
	if s.FWMark != 0 || s.AddressFamily != unix.AF_INET {
		return ServiceKey{}, false
	}
	ip, ok := netip.AddrFromSlice(s.Address.To4())
	if !ok {
		return ServiceKey{}, false
	}
	var proto backends.Protocol
	switch s.Protocol {
	case unix.IPPROTO_TCP:
		proto = backends.TCP
	case unix.IPPROTO_UDP:
		proto = backends.UDP
	case unix.IPPROTO_SCTP:
		proto = backends.SCTP
	default:
		return ServiceKey{}, false
	}
	return ServiceKey{Addr: ip, Protocol: proto, Port: s.Port}, true
}

// service converts a key (and settings) to moby/ipvs's form.
func service(k ServiceKey, vs *VirtualServer) *mipvs.Service {
	s := &mipvs.Service{
		Address: net.IP(k.Addr.AsSlice()), Port: k.Port, AddressFamily: unix.AF_INET,
		Netmask: 0xffffffff,
	}
	switch k.Protocol {
	case backends.UDP:
		s.Protocol = unix.IPPROTO_UDP
	case backends.SCTP:
		s.Protocol = unix.IPPROTO_SCTP
	default:
		s.Protocol = unix.IPPROTO_TCP
	}
	if vs != nil {
		s.SchedName, s.Flags, s.Timeout = vs.Scheduler, vs.Flags, vs.Timeout
	}
	return s
}

func destination(d DestChange) *mipvs.Destination {
	return &mipvs.Destination{
		Address: net.IP(d.Dest.Addr().AsSlice()), Port: d.Dest.Port(), Weight: d.Weight,
		ConnectionFlags: mipvs.ConnectionFlagMasq, AddressFamily: unix.AF_INET,
	}
}

// apply runs the plan: addresses first (a virtual server on an address that is not local
// yet would not see traffic), then virtual and real servers, deletions last.
//
// Equivalent to: `ip addr add $vip/32 dev kube-ipvs0`, `ipvsadm -A/-E/-a/-e/-d/-D ...`,
// `ip addr del $vip/32 dev kube-ipvs0`.
func (b *Backend) apply(link netlink.Link, p *Plan, want *Model) error {
	for _, a := range p.AddAddrs {
		if err := b.nl.AddrAdd(link, addr32(a)); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add %s to %s: %w", a, DummyDevice, err)
		}
	}
	for _, vs := range p.AddServices {
		if err := b.ipvs.NewService(service(vs.Key, vs)); err != nil {
			return fmt.Errorf("add virtual server %s: %w", vs.Key, err)
		}
	}
	for _, vs := range p.UpdateServices {
		if err := b.ipvs.UpdateService(service(vs.Key, vs)); err != nil {
			return fmt.Errorf("update virtual server %s: %w", vs.Key, err)
		}
	}
	for _, d := range p.AddDests {
		if err := b.ipvs.NewDestination(service(d.Service, want.Services[d.Service]), destination(d)); err != nil {
			return fmt.Errorf("add real server %s to %s: %w", d.Dest, d.Service, err)
		}
	}
	for _, d := range p.UpdateDests {
		if err := b.ipvs.UpdateDestination(service(d.Service, want.Services[d.Service]), destination(d)); err != nil {
			return fmt.Errorf("set weight of real server %s of %s: %w", d.Dest, d.Service, err)
		}
	}
	for _, d := range p.DelDests {
		if err := b.ipvs.DelDestination(service(d.Service, want.Services[d.Service]), destination(d)); err != nil {
			return fmt.Errorf("delete real server %s of %s: %w", d.Dest, d.Service, err)
		}
	}
	for _, k := range p.DelServices {
		if err := b.ipvs.DelService(service(k, nil)); err != nil {
			return fmt.Errorf("delete virtual server %s: %w", k, err)
		}
	}
	for _, a := range p.DelAddrs {
		if err := b.nl.AddrDel(link, addr32(a)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("delete %s from %s: %w", a, DummyDevice, err)
		}
	}
	return nil
}

func addr32(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(32, 32)}}
}

// presentJumps reads the nat and filter tables and returns which of Jumps() exist.
//
// Equivalent to: `iptables-nft-save -t nat; iptables-nft-save -t filter`.
func (b *Backend) presentJumps(ctx context.Context) ([]Jump, error) {
	var present []Jump
	for _, table := range []string{"nat", "filter"} {
		out, err := b.exec.Exec(ctx, netns.Command{Path: "iptables-nft-save", Args: []string{"-t", table}})
		if err != nil {
			return nil, err
		}
		lines := map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader(out.Stdout))
		for sc.Scan() {
			lines[sc.Text()] = true
		}
		for _, j := range Jumps() {
			if j.Table == table && lines[j.Rule()] {
				present = append(present, j)
			}
		}
	}
	return present, nil
}

// writeRules writes the constant ruleset with one iptables-nft-restore --noflush, inserting
// the jumps that are missing.
//
// Equivalent to: `iptables-nft-restore -w --noflush < rules`.
func (b *Backend) writeRules(ctx context.Context, cfg RulesConfig) (int, error) {
	present, err := b.presentJumps(ctx)
	if err != nil {
		return 0, fmt.Errorf("read iptables: %w", err)
	}
	var missing []Jump
	for _, j := range Jumps() {
		if !slices.Contains(present, j) {
			missing = append(missing, j)
		}
	}
	var in strings.Builder
	WriteRules(&in, cfg, missing)
	if _, err := b.exec.Exec(ctx, netns.Command{Path: "iptables-nft-restore", Args: []string{"-w", "--noflush"}, Stdin: []byte(in.String())}); err != nil {
		return in.Len(), fmt.Errorf("iptables-restore: %w", err)
	}
	return in.Len(), nil
}

// Cleanup removes every virtual server, kube-ipvs0, the iptables chains and jumps, and the
// ipsets, like `kube-proxy --cleanup` for IPVS mode. The next Sync is full.
//
// Equivalent to: `ipvsadm -C; ip link del kube-ipvs0`, then `iptables-nft-restore --noflush`
// of WriteCleanup (remove the jumps, flush and delete the chains), then `ipset destroy $set`
// for each set.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.synced.Reset()
	b.lastSets, b.lastCfg = nil, RulesConfig{}
	var errs []error
	if err := b.ipvs.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("flush ipvs: %w", err))
	}
	if link, err := b.nl.LinkByName(DummyDevice); err == nil {
		if err := b.nl.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", DummyDevice, err))
		}
	}
	present, err := b.presentJumps(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("read iptables: %w", err))
	} else if chainsExist, err := b.chainsExist(ctx); err != nil {
		errs = append(errs, err)
	} else if chainsExist || len(present) > 0 {
		var in strings.Builder
		WriteCleanup(&in, present)
		if _, err := b.exec.Exec(ctx, netns.Command{Path: "iptables-nft-restore", Args: []string{"-w", "--noflush"}, Stdin: []byte(in.String())}); err != nil {
			errs = append(errs, fmt.Errorf("iptables-restore cleanup: %w", err))
		}
	}
	out, err := b.exec.Exec(ctx, netns.Command{Path: "ipset", Args: []string{"list", "-n"}})
	if err != nil {
		errs = append(errs, fmt.Errorf("ipset list: %w", err))
	} else {
		existing := map[string]bool{}
		for _, n := range strings.Fields(string(out.Stdout)) {
			existing[n] = true
		}
		var in strings.Builder
		for _, spec := range SetSpecs() {
			if existing[spec.Name] {
				fmt.Fprintf(&in, "destroy %s\n", spec.Name)
			}
		}
		if in.Len() > 0 {
			if _, err := b.exec.Exec(ctx, netns.Command{Path: "ipset", Args: []string{"restore"}, Stdin: []byte(in.String())}); err != nil {
				errs = append(errs, fmt.Errorf("ipset destroy: %w", err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup %s ipvs: %w", b.opts.NodeName, err)
	}
	return nil
}

// chainsExist reports whether any of our chains is in the nat or filter table.
func (b *Backend) chainsExist(ctx context.Context) (bool, error) {
	for table, chains := range Chains() {
		out, err := b.exec.Exec(ctx, netns.Command{Path: "iptables-nft-save", Args: []string{"-t", table}})
		if err != nil {
			return false, fmt.Errorf("iptables-save -t %s: %w", table, err)
		}
		for _, ch := range chains {
			if bytes.Contains(out.Stdout, []byte("\n:"+ch+" ")) {
				return true, nil
			}
		}
	}
	return false, nil
}
