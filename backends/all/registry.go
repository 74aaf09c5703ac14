//go:build linux

package all

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/iptables"
	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/backends/nftables"
	"kpbench.dev/kpbench/backends/perrule"
	"kpbench.dev/kpbench/backends/userspace"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/upstream"
)

// factory builds a backend for one node; variant is what follows NAME@ in the reference
// ("" for none), already accepted by the entry's variant check.
type factory func(n Node, s Settings, variant string) (backends.Backend, error)

// entry is one registered backend: its facts and its factory.
type entry struct {
	Facts
	build factory
	// variant checks the VARIANT of a NAME@VARIANT reference; nil when the backend takes
	// none.
	variant func(v string) error
}

// lockFile is the node's own xtables lock (XTABLES_LOCKFILE), so that parallel syncs of
// legacy iptables on several nodes do not wait for each other. With a tool root the tools
// run chrooted and read the path inside the root: the lock is then
// ROOT/run/kpbench/xtables-NODE-HASH.lock, HASH telling apart labs with the same node
// names, and the root must be writable there.
func lockFile(n Node, s Settings) (string, error) {
	name := "xtables-" + n.Name + ".lock"
	if s.ToolRoot == "" {
		return filepath.Join(n.StateDir, name), nil
	}
	sum := sha256.Sum256([]byte(n.StateDir))
	dir := "/run/kpbench"
	if err := os.MkdirAll(filepath.Join(s.ToolRoot, dir), 0o755); err != nil {
		return "", fmt.Errorf("node %s: xtables lock in tool root %s: %w (legacy iptables takes its lock there)", n.Name, s.ToolRoot, err)
	}
	return filepath.Join(dir, "xtables-"+n.Name+"-"+hex.EncodeToString(sum[:4])+".lock"), nil
}

// The rule dumps of each family. kube-proxy runs the host's iptables, which is
// iptables-nft on Debian, so its iptables mode is dumped like ours. Legacy iptables-save
// finds its tables in /proc/net/ip_tables_names, which a tool root has not mounted: it
// dumps each of our tables by name.
var (
	dumpIPTablesNFT    = []netns.Command{{Path: "iptables-nft-save"}}
	dumpIPTablesLegacy = []netns.Command{
		{Path: "iptables-legacy-save", Args: []string{"-t", "filter"}},
		{Path: "iptables-legacy-save", Args: []string{"-t", "nat"}},
		{Path: "iptables-legacy-save", Args: []string{"-t", "mangle"}},
	}
	dumpNFTables = []netns.Command{{Path: "nft", Args: nftables.DumpArgs()}}
	dumpIPVS     = []netns.Command{{Path: "ipvsadm", Args: ipvs.DumpArgs()}}
)

// ipvsState explains an IPVS node beyond -Ln (weights, active and inactive connections):
// packets and bytes per server, the connection table with each entry's state and expiry,
// and what decides whether a packet reaches IPVS at all: the iptables rules with their
// packet counters, the ipsets they match, kube-ipvs0's addresses, the routes, any other
// nftables table, conntrack's and the IP stack's drop counters.
var ipvsState = []netns.Command{
	{Path: "ipvsadm", Args: []string{"-Ln", "--stats"}},
	{Path: "ipvsadm", Args: []string{"-Lnc"}},
	{Path: "iptables-save", Args: []string{"-c"}},
	{Path: "ipset", Args: []string{"list"}},
	{Path: "ip", Args: []string{"-4", "addr", "show"}},
	{Path: "ip", Args: []string{"-4", "route", "show", "table", "all"}},
	{Path: "nft", Args: []string{"list", "ruleset"}},
	{Path: "conntrack", Args: []string{"-S"}},
	{Path: "nstat", Args: []string{"-asz"}},
}

var (
	normalizeIPTables = &Normalizer{Kind: "iptables-save", Normalize: kubeproxy.NormalizeIPTables}
	normalizeNFT      = &Normalizer{Kind: "nft", Normalize: kubeproxy.NormalizeNFT}
)

// registry returns every backend, built fresh on each call (no package-level state).
func registry() []entry {
	return []entry{
		{
			Facts: Facts{
				Name: "iptables", Doc: "kube-proxy's iptables mode, written by kpbench with iptables-nft-restore",
				Family: FamilyIPTablesNFT, Mode: kubeproxy.ModeIPTables, ModeDefault: true,
				Dump: dumpIPTablesNFT, CountRules: iptables.CountSavedRules, Normalizer: normalizeIPTables,
				Caps:     Capabilities{WholeTableCache: true},
				Variants: "iptables@" + variantWholeTableCache + " (the whole-table cache hint on), iptables@" + variantSame + " (the same backend under another name, for A = B runs), iptables@" + variantSlowPrefix + "N (every sync N% slower, to prove the A/B gate), iptables@" + variantSkew + " (endpoint rules at probability 1/n, the classic bug, to prove the distribution checks) or iptables@" + variantBlackholePrefix + "N (N% of the Services' traffic dropped, to prove the churn's bounds)",
			},
			build: func(n Node, s Settings, variant string) (backends.Backend, error) {
				lock, err := lockFile(n, s)
				if err != nil {
					return nil, err
				}
				o := iptables.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, ToolRoot: s.ToolRoot, Flavor: iptables.FlavorNFT, LockFile: lock, MasqueradeBit: s.MasqueradeBit, WholeTableCache: s.IPTablesWholeTableCache}
				if variant == variantWholeTableCache {
					o.Name, o.WholeTableCache = Reference("iptables", variant), true
				}
				if variant == variantSame {
					o.Name = Reference("iptables", variant)
				}
				if variant == variantSkew {
					o.Name, o.NaiveProbabilities = Reference("iptables", variant), true
				}
				if slow, ok, _ := parseSlow(variant); ok {
					return &slowed{wrapped: wrapped{iptables.New(o), Reference("iptables", variant)}, slowdown: slow}, nil
				}
				if share, ok, _ := parseBlackhole(variant); ok {
					return &blackholed{wrapped: wrapped{iptables.New(o), Reference("iptables", variant)}, share: share}, nil
				}
				return iptables.New(o), nil
			},
			variant: func(v string) error {
				if _, ok, err := parseSlow(v); ok {
					return err
				}
				if _, ok, err := parseBlackhole(v); ok {
					return err
				}
				if v != variantWholeTableCache && v != variantSame && v != variantSkew {
					return fmt.Errorf("want %s, %s, %s, %sN or %sN", variantWholeTableCache, variantSame, variantSkew, variantSlowPrefix, variantBlackholePrefix)
				}
				return nil
			},
		},
		{
			Facts: Facts{
				Name: "iptables-legacy", Doc: "the iptables mode through iptables-legacy (x_tables, whole-table replacement)",
				Family: FamilyIPTablesLegacy, Mode: kubeproxy.ModeIPTables,
				Dump: dumpIPTablesLegacy, CountRules: iptables.CountSavedRules, Normalizer: normalizeIPTables,
			},
			build: func(n Node, s Settings, _ string) (backends.Backend, error) {
				lock, err := lockFile(n, s)
				if err != nil {
					return nil, err
				}
				return iptables.New(iptables.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, ToolRoot: s.ToolRoot, Flavor: iptables.FlavorLegacy, LockFile: lock, MasqueradeBit: s.MasqueradeBit}), nil
			},
		},
		{
			Facts: Facts{
				Name: "iptables-perrule", Doc: "the iptables mode's rules applied one iptables-legacy call per rule (go-iptables), as proxies did before 2017; hours at the ladder's sizes",
				Family: FamilyIPTablesLegacy, Mode: kubeproxy.ModeIPTables,
				Dump: dumpIPTablesLegacy, CountRules: iptables.CountSavedRules, Normalizer: normalizeIPTables,
				Caps: Capabilities{PerRuleTiming: true, ExplicitOnly: true},
			},
			build: func(n Node, s Settings, _ string) (backends.Backend, error) {
				return perrule.New(perrule.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, ToolRoot: s.ToolRoot, Flavor: iptables.FlavorLegacy, MasqueradeBit: s.MasqueradeBit}), nil
			},
		},
		{
			Facts: Facts{
				Name: "ipvs", Doc: "kube-proxy's IPVS mode: virtual servers over netlink, ipsets and a constant iptables-nft ruleset",
				Family: FamilyIPVS, Mode: kubeproxy.ModeIPVS, ModeDefault: true,
				Dump: dumpIPVS, CountRules: ipvs.CountListed, State: ipvsState,
				Caps: Capabilities{IPVSExperiments: true, NeedsIPVS: true},
			},
			build: func(n Node, s Settings, _ string) (backends.Backend, error) {
				return ipvs.New(ipvs.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, ToolRoot: s.ToolRoot, Scheduler: s.Scheduler, MasqueradeBit: s.MasqueradeBit})
			},
		},
		{
			Facts: Facts{
				Name: "userspace", Doc: "kube-proxy's original userspace mode: a proxy in kpbench's process behind iptables-nft redirects",
				Family: FamilyUserspace, Mode: kubeproxy.ModeIPTables,
				Dump: dumpIPTablesNFT, CountRules: iptables.CountSavedRules,
			},
			build: func(n Node, s Settings, _ string) (backends.Backend, error) {
				lock, err := lockFile(n, s)
				if err != nil {
					return nil, err
				}
				return userspace.New(userspace.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, ToolRoot: s.ToolRoot, LockFile: lock})
			},
		},
		{
			Facts: Facts{
				Name: "nftables", Doc: "kube-proxy's nftables mode, written by kpbench with knftables",
				Family: FamilyNFTables, Mode: kubeproxy.ModeNFTables, ModeDefault: true,
				Dump: dumpNFTables, CountRules: nftables.CountListed, Normalizer: normalizeNFT,
			},
			build: func(n Node, s Settings, _ string) (backends.Backend, error) {
				return nftables.New(nftables.Options{NodeName: n.Name, NetNSPath: n.NetNSPath, ToolRoot: s.ToolRoot})
			},
		},
		kubeProxyEntry(kubeproxy.ModeIPTables, FamilyIPTablesNFT, dumpIPTablesNFT, iptables.CountSavedRules, nil, normalizeIPTables, false),
		kubeProxyEntry(kubeproxy.ModeNFTables, FamilyNFTables, dumpNFTables, nftables.CountListed, nil, normalizeNFT, false),
		kubeProxyEntry(kubeproxy.ModeIPVS, FamilyIPVS, dumpIPVS, ipvs.CountListed, ipvsState, nil, true),
	}
}

// kubeProxyEntry registers upstream kube-proxy in mode: its rules are those of the family
// it writes.
func kubeProxyEntry(mode kubeproxy.Mode, family RuleFamily, dump []netns.Command, count func([]byte) (int, error), state []netns.Command, norm *Normalizer, needsIPVS bool) entry {
	return entry{
		Facts: Facts{
			Name: "kube-proxy-" + string(mode), Doc: "upstream kube-proxy in " + string(mode) + " mode (make upstream), reading the lab's API server",
			Family: family, Mode: mode,
			Dump: dump, CountRules: count, State: state, Normalizer: norm,
			Caps:     Capabilities{NeedsAPIServer: true, NeedsIPVS: needsIPVS},
			Variants: "kube-proxy-" + string(mode) + "@vX.Y.Z (the kube-proxy of that release, built under " + upstream.Root() + "/vX.Y.Z/bin) or kube-proxy-" + string(mode) + "@/abs/path/to/kube-proxy",
		},
		build:   kubeProxy(mode),
		variant: kubeProxyVariant,
	}
}
