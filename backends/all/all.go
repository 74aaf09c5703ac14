//go:build linux

// Package all is the registry of backends: each one's factory and its facts (how to dump
// and count its rules, how to explain a failure, how to normalise its rules for
// diff-rules, its capabilities and needs), looked up by name. It is the only place that
// imports every backend package, and the only place that knows a backend by its name:
// code outside backends/ asks the registry instead of switching on names.
package all

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/netns"
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
	// ToolRoot is a prepared root directory (a Debian root of another release: `kpbench
	// tools prepare`) that every external tool of our backends runs from, chrooted inside
	// the node's namespace: nft, iptables of both flavours, ipset, and the node state's
	// ipvsadm and conntrack. Empty (the zero value): the host's tools. Upstream kube-proxy
	// runs its own tools and refuses a root.
	ToolRoot string
}

// Tools returns how the tools of backends with these settings run in the namespace at
// nsPath.
func (s Settings) Tools(nsPath string) netns.Tools {
	return netns.Tools{NSPath: nsPath, Root: s.ToolRoot}
}

// NeedsAPIServer reports whether the named backend reads Services and EndpointSlices from
// a real API server (upstream kube-proxy) rather than from our agent: the testbed must then
// start the lab's control plane and publisher, and fill Node.Kubeconfig, Node.IP and
// Node.WaitPublished. Such a backend runs its own sync loop: the agent should call Sync as
// soon as changes arrive (MinSyncPeriod 0) and never force periodic full syncs (each one
// restarts kube-proxy); the backend's Sync only waits for upstream to catch up. Stop it with
// Close before the control plane. An unknown name needs none.
func NeedsAPIServer(name string) bool {
	f, ok := Lookup(name)
	return ok && f.Caps.NeedsAPIServer
}

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
func HasUpstream() bool { return upstreamMissing() == nil }

// upstreamMissing returns why the upstream binaries cannot run (the first one not built,
// with the make target that builds it), nil when they are all there.
func upstreamMissing() error {
	for _, n := range upstream.Names() {
		if _, err := upstream.Binary(n); err != nil {
			return err
		}
	}
	return nil
}

// Names returns every backend name, sorted.
func Names() []string {
	var names []string
	for _, e := range registry() {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return names
}

// find returns the registry entry of a backend's name (not a reference).
func find(name string) (entry, bool) {
	for _, e := range registry() {
		if e.Name == name {
			return e, true
		}
	}
	return entry{}, false
}

// Lookup returns the facts of the backend a reference names (NAME or NAME@VARIANT: a
// variant has its backend's facts). It does not check the variant: see Validate.
func Lookup(ref string) (Facts, bool) {
	name, _ := Split(ref)
	e, ok := find(name)
	return e.Facts, ok
}

// Registered returns the facts of every backend, sorted by name.
func Registered() []Facts {
	var out []Facts
	for _, n := range Names() {
		f, _ := Lookup(n)
		out = append(out, f)
	}
	return out
}

// New builds the backend a reference names (NAME or NAME@VARIANT, see Validate) for a
// node. Its Name is the reference.
func New(ref string, n Node, s Settings) (backends.Backend, error) {
	if err := Validate(ref); err != nil {
		return nil, err
	}
	name, variant := Split(ref)
	e, _ := find(name)
	return e.build(n, s, variant)
}

// Valid reports whether ref is a valid backend reference (Validate says why not).
func Valid(ref string) bool { return Validate(ref) == nil }

// ForMode returns the backend that stands for a KubeProxyConfiguration mode ("" is
// kube-proxy's default, iptables), and false when no backend implements mode (mode itself
// is returned then, for the caller's error).
func ForMode(mode string) (string, bool) {
	if mode == "" {
		mode = string(kubeproxy.ModeIPTables)
	}
	for _, e := range registry() {
		if e.ModeDefault && string(e.Mode) == mode {
			return e.Name, true
		}
	}
	return mode, false
}

// Normalizable returns the backends whose rules diff-rules can compare, sorted.
func Normalizable() []string {
	var out []string
	for _, f := range Registered() {
		if f.Normalizer != nil {
			out = append(out, f.Name)
		}
	}
	return out
}

// Available returns the backends that `--backend all` means: every backend that runs on
// this machine, except those that run only when named (iptables-perrule, which
// reproduces the 2017 one-call-per-rule behaviour and would take hours at the ladder's
// sizes). Backends that need IPVS are in only where the kernel has it (inside `kpbench vm
// run`, or the workshop VM), upstream kube-proxy only when `make upstream` has built it.
func Available() []string { return ThisMachine().Available() }

// Ours returns Available without upstream kube-proxy: kpbench's own backends that run
// here (`--backend ours`; upstream's ladder to 10k would not fit a bench's time).
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
func HasIPVS() bool { return probeIPVS() == nil }
