//go:build linux

// Package all knows every backend by name and builds one for a node. It is the only place
// that imports every backend package.
package all

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/backends/iptables"
	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/backends/nftables"
	"kpbench.dev/kpbench/backends/perrule"
	"kpbench.dev/kpbench/backends/userspace"
	"kpbench.dev/kpbench/internal/upstream"
)

// Node says where a backend works: the node's name, namespace and a private directory
// (for per-node lock files).
type Node struct {
	Name      string
	NetNSPath string
	// StateDir holds per-node files such as the xtables lock file.
	StateDir string
	// IP is the node's fabric address (where kube-proxy serves metrics and healthz).
	// Only the kube-proxy-* backends need it.
	IP netip.Addr
	// Kubeconfig is the path of a kubeconfig for the lab's API server
	// (controlplane.KubeconfigFor(node)); WaitPublished blocks until the lab's store is in
	// the API server (the publisher's WaitPublished at the store's current version). Only
	// backends for which NeedsAPIServer is true use them.
	Kubeconfig    string
	WaitPublished func(ctx context.Context) error
}

// Settings are the proxy configuration values backends take.
type Settings struct {
	// MasqueradeBit for iptables modes (0: kube-proxy's 14, i.e. 0x4000).
	MasqueradeBit int
	// Scheduler for IPVS ("" = rr).
	Scheduler string
	// IPTablesWholeTableCache turns on iptables.Options.WholeTableCache for the iptables
	// (nft) backend.
	IPTablesWholeTableCache bool
	// MinSyncPeriod, SyncPeriod, ClusterCIDR and MasqueradeAll configure upstream
	// kube-proxy (the kube-proxy-* backends), which runs its own sync loop; our backends
	// take them through the agent and the view instead.
	MinSyncPeriod, SyncPeriod time.Duration
	ClusterCIDR               netip.Prefix
	MasqueradeAll             bool
}

// kubeProxy builds a factory for upstream kube-proxy in mode.
func kubeProxy(mode kubeproxy.Mode) factory {
	return func(n Node, s Settings) (backends.Backend, error) {
		bin, err := upstream.Binary(upstream.KubeProxy)
		if err != nil {
			return nil, err
		}
		if n.NetNSPath != "" && n.Kubeconfig == "" {
			return nil, fmt.Errorf("node %s: kube-proxy-%s reads a real API server, and the testbed started none (no kubeconfig for the node)", n.Name, mode)
		}
		b, err := kubeproxy.New(kubeproxy.Options{
			Binary: bin, NetNSPath: n.NetNSPath, StateDir: n.StateDir, WaitPublished: n.WaitPublished,
			Config: kubeproxy.Config{
				Mode: mode, NodeName: n.Name, NodeIP: n.IP, ClusterCIDR: s.ClusterCIDR, Kubeconfig: n.Kubeconfig,
				MinSyncPeriod: s.MinSyncPeriod, SyncPeriod: s.SyncPeriod,
				MasqueradeBit: s.MasqueradeBit, MasqueradeAll: s.MasqueradeAll, Scheduler: s.Scheduler,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		return b, nil
	}
}

// NeedsAPIServer reports whether the named backend reads Services and EndpointSlices from
// a real API server (upstream kube-proxy) rather than from our agent: the testbed must then
// start the lab's control plane and publisher, and fill Node.Kubeconfig, Node.IP and
// Node.WaitPublished. Such a backend runs its own sync loop: the agent should call Sync as
// soon as changes arrive (MinSyncPeriod 0) and never force periodic full syncs (each one
// restarts kube-proxy); the backend's Sync only waits for upstream to catch up. Stop it with
// Close before the control plane.
func NeedsAPIServer(name string) bool { return strings.HasPrefix(name, "kube-proxy-") }

// Close stops what a backend runs in the background (the kube-proxy process of the
// kube-proxy-* backends), leaving its rules to the lab's teardown; it does nothing for
// backends that run nothing. Call it after the agent has stopped.
func Close(ctx context.Context, b backends.Backend) error {
	if c, ok := b.(interface{ Close(context.Context) error }); ok {
		return c.Close(ctx)
	}
	return nil
}

// HasUpstream reports whether the upstream binaries (kube-proxy, kube-apiserver, etcd) are
// built (`make upstream`).
func HasUpstream() bool {
	for _, n := range upstream.Names() {
		if _, err := upstream.Binary(n); err != nil {
			return false
		}
	}
	return true
}

type factory func(n Node, s Settings) (backends.Backend, error)

func lockFile(n Node) string { return filepath.Join(n.StateDir, "xtables-"+n.Name+".lock") }

func registry() map[string]factory {
	return map[string]factory{
		"iptables": func(n Node, s Settings) (backends.Backend, error) {
			return iptables.New(iptables.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, Flavor: iptables.FlavorNFT, LockFile: lockFile(n), MasqueradeBit: s.MasqueradeBit, WholeTableCache: s.IPTablesWholeTableCache}), nil
		},
		"iptables-legacy": func(n Node, s Settings) (backends.Backend, error) {
			return iptables.New(iptables.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, Flavor: iptables.FlavorLegacy, LockFile: lockFile(n), MasqueradeBit: s.MasqueradeBit}), nil
		},
		"iptables-perrule": func(n Node, s Settings) (backends.Backend, error) {
			return perrule.New(perrule.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, Flavor: iptables.FlavorLegacy, MasqueradeBit: s.MasqueradeBit}), nil
		},
		"ipvs": func(n Node, s Settings) (backends.Backend, error) {
			return ipvs.New(ipvs.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, Scheduler: s.Scheduler, MasqueradeBit: s.MasqueradeBit})
		},
		"userspace": func(n Node, s Settings) (backends.Backend, error) {
			return userspace.New(userspace.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, LockFile: lockFile(n)})
		},
		"nftables": func(n Node, s Settings) (backends.Backend, error) {
			b, err := nftables.New(nftables.Options{NodeName: n.Name, NetNSPath: n.NetNSPath})
			if err != nil {
				return nil, err
			}
			return conntrack.WithUDPCleanup(b, n.NetNSPath), nil
		},
		"kube-proxy-iptables": kubeProxy(kubeproxy.ModeIPTables),
		"kube-proxy-nftables": kubeProxy(kubeproxy.ModeNFTables),
		"kube-proxy-ipvs":     kubeProxy(kubeproxy.ModeIPVS),
	}
}

// Names returns every backend name, sorted.
func Names() []string {
	var names []string
	for n := range registry() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New builds the named backend for a node.
func New(name string, n Node, s Settings) (backends.Backend, error) {
	f, ok := registry()[name]
	if !ok {
		return nil, fmt.Errorf("unknown backend %q: allowed values are %s", name, strings.Join(Names(), ", "))
	}
	return f(n, s)
}

// Valid reports whether name is a known backend.
func Valid(name string) bool {
	_, ok := registry()[name]
	return ok
}

// Available returns the backends that `--backend all` means: every backend that runs on
// this machine's kernel (ipvs only where the kernel has IPVS: inside `kpbench vm run`),
// except iptables-perrule, which reproduces the 2017 one-call-per-rule behaviour and would
// take hours at the ladder's sizes (name it explicitly). The kube-proxy-* backends are in
// only when the upstream binaries are built (`make upstream`), kube-proxy-ipvs only where
// the kernel has IPVS.
func Available() []string {
	var out []string
	upstreamOK := HasUpstream()
	for _, n := range Names() {
		switch {
		case n == "iptables-perrule":
		case NeedsAPIServer(n) && !upstreamOK:
		case (n == "ipvs" || n == "kube-proxy-ipvs") && !HasIPVS():
		default:
			out = append(out, n)
		}
	}
	return out
}

// Ours returns Available without the kube-proxy-* backends: kpbench's own backends that
// run here (`--backend ours`, what `make bench` runs; upstream's ladder to 10k would not fit
// its time).
func Ours() []string {
	var out []string
	for _, n := range Available() {
		if !NeedsAPIServer(n) {
			out = append(out, n)
		}
	}
	return out
}

// HasIPVS reports whether this kernel has IPVS (asks for the IPVS generic netlink family
// in the process's own namespace: a query, nothing is written).
func HasIPVS() bool { return ipvs.Probe("/proc/self/ns/net") == nil }
