//go:build linux

// Package all knows every backend by name and builds one for a node. It is the only place
// that imports every backend package.
package all

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/backends/iptables"
	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/backends/nftables"
	"kpbench.dev/kpbench/backends/perrule"
	"kpbench.dev/kpbench/backends/userspace"
)

// Node says where a backend works: the node's name, namespace and a private directory
// (for per-node lock files).
type Node struct {
	Name      string
	NetNSPath string
	// StateDir holds per-node files such as the xtables lock file.
	StateDir string
}

// Settings are the proxy configuration values backends take.
type Settings struct {
	// MasqueradeBit for iptables modes (0: kube-proxy's 14, i.e. 0x4000).
	MasqueradeBit int
	// Scheduler for IPVS ("" = rr).
	Scheduler string
}

type factory func(n Node, s Settings) (backends.Backend, error)

func lockFile(n Node) string { return filepath.Join(n.StateDir, "xtables-"+n.Name+".lock") }

func registry() map[string]factory {
	return map[string]factory{
		"iptables": func(n Node, s Settings) (backends.Backend, error) {
			return iptables.New(iptables.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, Flavor: iptables.FlavorNFT, LockFile: lockFile(n), MasqueradeBit: s.MasqueradeBit}), nil
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
// take hours at the ladder's sizes (name it explicitly).
func Available() []string {
	var out []string
	for _, n := range Names() {
		switch {
		case n == "iptables-perrule":
		case n == "ipvs" && !HasIPVS():
		default:
			out = append(out, n)
		}
	}
	return out
}

// HasIPVS reports whether this kernel has IPVS (asks for the IPVS generic netlink family
// in the process's own namespace: a query, nothing is written).
func HasIPVS() bool { return ipvs.Probe("/proc/self/ns/net") == nil }
