package iptables

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"kpbench.dev/kpbench/backends"
)

// DefaultMasqueradeBit is kube-proxy's default --iptables-masquerade-bit (mark 0x4000).
const DefaultMasqueradeBit = 14

// markDropBit is the bit KUBE-MARK-DROP sets (0x8000), as kubelet and older kube-proxy did.
const markDropBit = 15

// DefaultAffinityTimeoutSeconds is the ClientIP affinity timeout used when a service port
// has none (Kubernetes' default, 3 hours).
const DefaultAffinityTimeoutSeconds = 10800

// LargeClusterEndpointsThreshold is kube-proxy's largeClusterEndpointsThreshold: above this
// many endpoints in total, per-endpoint comments are left out to shrink the restore input.
const LargeClusterEndpointsThreshold = 1000

// Request is what one generation writes.
type Request struct {
	// State is the desired state of the node (services sorted by name).
	State *backends.State
	// Changed names the service ports whose per-service chains (SVC/SVL/EXT/FW/SEP) are
	// written. Nil means a full sync: every chain is written, plus the canary chains.
	// Top-level chains (KUBE-SERVICES, KUBE-NODEPORTS, the filter chains ...) are always
	// written in full, as kube-proxy does.
	Changed map[backends.ServicePortName]bool
	// Installed are the per-service nat chains believed to exist in the kernel (the Active
	// set of the last successful sync). Those no longer in use are flushed and deleted (-X).
	Installed map[string]struct{}
}

// Result describes what Generate wrote.
type Result struct {
	// Full is true when Request.Changed was nil.
	Full bool
	// Rules is the number of rules (-A lines) written, Bytes the size of the input.
	Rules, Bytes int
	// ChangedServices is the number of service ports whose own chains were written.
	ChangedServices int
	// Active holds every per-service nat chain the state uses, written or not: after a
	// successful restore it is what the kernel holds, and the next Request.Installed.
	Active map[string]struct{}
	// Deleted lists the stale chains the input deletes, sorted.
	Deleted []string
}

// Generator builds iptables-restore input the way kube-proxy's iptables proxier does. It
// keeps its buffers between calls so that repeated syncs allocate little; it is not safe
// for concurrent use.
type Generator struct {
	masqMark     string // "0x4000"
	masqMarkMask string // "0x4000/0x4000"
	dropMark     string

	filterChains, filterRules, natChains, natRules bytes.Buffer
	scratch                                        []byte
	probs                                          []string
	rules                                          int
	naive                                          bool // Options.NaiveProbabilities
}

// NewGenerator returns a generator whose KUBE-MARK-MASQ sets bit masqueradeBit (0..31;
// out-of-range values select DefaultMasqueradeBit).
func NewGenerator(masqueradeBit int) *Generator {
	if masqueradeBit < 0 || masqueradeBit > 31 {
		masqueradeBit = DefaultMasqueradeBit
	}
	m := fmt.Sprintf("0x%x", uint32(1)<<masqueradeBit)
	return &Generator{
		masqMark:     m,
		masqMarkMask: m + "/" + m,
		dropMark:     fmt.Sprintf("0x%x", uint32(1)<<markDropBit),
	}
}

// MasqueradeMark returns the mark KUBE-MARK-MASQ sets, e.g. "0x4000".
func (g *Generator) MasqueradeMark() string { return g.masqMark }

// probability returns 1/n with 10 decimals (kube-proxy's computeProbability), cached.
func (g *Generator) probability(n int) string {
	for len(g.probs) <= n {
		g.probs = append(g.probs, "")
	}
	if g.probs[n] == "" {
		g.probs[n] = fmt.Sprintf("%0.10f", 1.0/float64(n))
	}
	return g.probs[n]
}

func protoLower(p backends.Protocol) string {
	switch p {
	case backends.TCP:
		return "tcp"
	case backends.UDP:
		return "udp"
	case backends.SCTP:
		return "sctp"
	}
	return p.Lower()
}

// Generate writes the iptables-restore input for req into out (which it does not reset)
// and describes it. The input has a *filter and a *nat section (and, on full syncs, a
// *mangle section creating the canary chain), each ending in COMMIT, for
// `iptables-restore --noflush`.
func (g *Generator) Generate(out *bytes.Buffer, req Request) Result {
	g.filterChains.Reset()
	g.filterRules.Reset()
	g.natChains.Reset()
	g.natRules.Reset()
	g.rules = 0
	st := req.State
	full := req.Changed == nil
	res := Result{Full: full, Active: make(map[string]struct{}, max(len(req.Installed), 3*len(st.Services))+16)}

	for _, c := range [...]string{ChainNodePorts, ChainServices, ChainExternalServices, ChainForward, ChainProxyFirewall} {
		chainLine(&g.filterChains, c)
	}
	for _, c := range [...]string{ChainServices, ChainNodePorts, ChainPostrouting, ChainMarkMasq, ChainMarkDrop} {
		chainLine(&g.natChains, c)
	}
	if full {
		chainLine(&g.filterChains, ChainCanary)
		chainLine(&g.natChains, ChainCanary)
	}

	// kube-proxy's fixed rules.
	nr, fr := &g.natRules, &g.filterRules
	g.fixedRule(nr, ChainPostrouting, " -m mark ! --mark ", g.masqMarkMask, " -j RETURN")
	g.fixedRule(nr, ChainPostrouting, " -j MARK --xor-mark ", g.masqMark)
	g.fixedRule(nr, ChainPostrouting, ` -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	g.fixedRule(nr, ChainMarkMasq, " -j MARK --or-mark ", g.masqMark)
	g.fixedRule(nr, ChainMarkDrop, " -j MARK --or-mark ", g.dropMark)

	g.fixedRule(fr, ChainForward, " -m conntrack --ctstate INVALID -j DROP")
	g.fixedRule(fr, ChainForward, ` -m comment --comment "kubernetes forwarding rules" -m mark --mark `, g.masqMarkMask, " -j ACCEPT")
	g.fixedRule(fr, ChainForward, ` -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`)

	total := 0
	for _, sp := range st.Services {
		total += len(sp.Endpoints)
	}
	large := total > LargeClusterEndpointsThreshold

	for _, sp := range st.Services {
		write := full || req.Changed[sp.Name]
		if write {
			res.ChangedServices++
		}
		g.service(st, sp, write, large, res.Active)
	}

	g.fixedRule(nr, ChainServices, ` -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`)

	for c := range req.Installed {
		if _, ok := res.Active[c]; !ok {
			res.Deleted = append(res.Deleted, c)
		}
	}
	slices.Sort(res.Deleted)
	for _, c := range res.Deleted {
		chainLine(&g.natChains, c)
		nr.WriteString("-X ")
		nr.WriteString(c)
		nr.WriteByte('\n')
	}

	start := out.Len()
	out.Grow(g.filterChains.Len() + g.filterRules.Len() + g.natChains.Len() + g.natRules.Len() + 64)
	out.WriteString("*filter\n")
	out.Write(g.filterChains.Bytes())
	out.Write(g.filterRules.Bytes())
	out.WriteString("COMMIT\n*nat\n")
	out.Write(g.natChains.Bytes())
	out.Write(g.natRules.Bytes())
	out.WriteString("COMMIT\n")
	if full {
		out.WriteString("*mangle\n:" + ChainCanary + " - [0:0]\nCOMMIT\n")
	}
	res.Rules = g.rules
	res.Bytes = out.Len() - start
	return res
}

// chainLine writes ":CHAIN - [0:0]", which creates the chain or flushes it.
func chainLine(b *bytes.Buffer, chain string) {
	b.WriteByte(':')
	b.WriteString(chain)
	b.WriteString(" - [0:0]\n")
}

// rule starts "-A chain" and counts it.
func (g *Generator) rule(b *bytes.Buffer, chain string) {
	g.rules++
	b.WriteString("-A ")
	b.WriteString(chain)
}

// fixedRule writes one whole rule of chain: "-A chain", then parts, then a newline (for the
// rules written once a sync, whatever the Services).
func (g *Generator) fixedRule(b *bytes.Buffer, chain string, parts ...string) {
	g.rule(b, chain)
	for _, p := range parts {
		b.WriteString(p)
	}
	b.WriteByte('\n')
}

func (g *Generator) addr(b *bytes.Buffer, a netip.Addr) {
	g.scratch = a.AppendTo(g.scratch[:0])
	b.Write(g.scratch)
}

func (g *Generator) num(b *bytes.Buffer, n int32) {
	g.scratch = strconv.AppendInt(g.scratch[:0], int64(n), 10)
	b.Write(g.scratch)
}

// comment writes ` -m comment --comment "name suffix"`.
func comment(b *bytes.Buffer, name, suffix string) {
	b.WriteString(` -m comment --comment "`)
	b.WriteString(name)
	b.WriteString(suffix)
	b.WriteByte('"')
}

// match writes ` -m proto -p proto [-d ip] --dport port`.
func (g *Generator) match(b *bytes.Buffer, proto string, dst netip.Addr, port int32) {
	b.WriteString(" -m ")
	b.WriteString(proto)
	b.WriteString(" -p ")
	b.WriteString(proto)
	if dst.IsValid() {
		b.WriteString(" -d ")
		g.addr(b, dst)
	}
	b.WriteString(" --dport ")
	g.num(b, port)
}

// portRule writes a whole rule of chain for the service port name: its comment (name and
// suffix), the match of proto, dst (none: any) and port, and the jump to target.
func (g *Generator) portRule(b *bytes.Buffer, chain, name, suffix, proto string, dst netip.Addr, port int32, target string) {
	g.rule(b, chain)
	comment(b, name, suffix)
	g.match(b, proto, dst, port)
	jump(b, target)
}

func jump(b *bytes.Buffer, target string) {
	b.WriteString(" -j ")
	b.WriteString(target)
	b.WriteByte('\n')
}

// service writes one service port's rules: always its entries in the top-level chains;
// its own chains only when write is set. Every per-service chain it uses goes into active.
func (g *Generator) service(st *backends.State, sp *backends.ServicePort, write, large bool, active map[string]struct{}) {
	c := backends.CategorizeEndpoints(sp)
	proto := protoLower(sp.Name.Protocol)
	name := portNameString(sp.Name)
	hash := hashOf(name, proto, "")
	svcChain := ServiceChainPrefix + hash
	svlChain := LocalChainPrefix + hash
	extChain := ExternalChainPrefix + hash
	fwChain := FirewallChainPrefix + hash

	hasEndpoints := c.HasAnyEndpoints
	usesCluster := len(c.Cluster) > 0
	usesLocal := len(c.Local) > 0

	pc := c.PolicyChains(sp, svcChain, svlChain)
	extLocal := sp.UsesLocalExternal()
	usesExt := hasEndpoints && sp.ExternallyAccessible()
	lbChain := extChain
	usesFW := hasEndpoints && len(sp.LoadBalancerIPs) > 0 && len(sp.LoadBalancerSourceRanges) > 0
	if usesFW {
		lbChain = fwChain
	}

	var intTarget, intComment, extTarget, extComment string
	if !hasEndpoints {
		intTarget, intComment = "REJECT", " has no endpoints"
		extTarget, extComment = intTarget, intComment
	} else {
		if !pc.HasInternal {
			intTarget, intComment = "DROP", " has no local endpoints"
		}
		if !pc.HasExternal {
			extTarget, extComment = "DROP", " has no local endpoints"
		}
	}

	nr, fr := &g.natRules, &g.filterRules
	noAddr := netip.Addr{}

	// Cluster IP.
	if pc.HasInternal {
		g.portRule(nr, ChainServices, name, " cluster IP", proto, sp.ClusterIP, sp.Port, pc.Internal)
	} else {
		g.portRule(fr, ChainServices, name, intComment, proto, sp.ClusterIP, sp.Port, intTarget)
	}
	// External IPs.
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			g.portRule(nr, ChainServices, name, " external IP", proto, ip, sp.Port, extChain)
		}
		if !pc.HasExternal {
			g.portRule(fr, ChainExternalServices, name, extComment, proto, ip, sp.Port, extTarget)
		}
	}
	// Load-balancer IPs.
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			g.portRule(nr, ChainServices, name, " loadbalancer IP", proto, ip, sp.Port, lbChain)
		}
		if usesFW {
			g.portRule(fr, ChainProxyFirewall, name, " traffic not accepted by "+fwChain, proto, ip, sp.Port, "DROP")
		}
	}
	if !pc.HasExternal {
		for _, ip := range sp.LoadBalancerIPs {
			g.portRule(fr, ChainExternalServices, name, extComment, proto, ip, sp.Port, extTarget)
		}
	}
	// Node ports.
	if sp.NodePort != 0 {
		if hasEndpoints {
			g.rule(nr, ChainNodePorts)
			nr.WriteString(" -m comment --comment ")
			nr.WriteString(name)
			g.match(nr, proto, noAddr, sp.NodePort)
			jump(nr, extChain)
		}
		if !pc.HasExternal {
			g.rule(fr, ChainExternalServices)
			comment(fr, name, extComment)
			fr.WriteString(" -m addrtype --dst-type LOCAL")
			g.match(fr, proto, noAddr, sp.NodePort)
			jump(fr, extTarget)
		}
	}
	if sp.HealthCheckNodePort != 0 {
		g.portRule(fr, ChainNodePorts, name, " health check node port", "tcp", noAddr, sp.HealthCheckNodePort, "ACCEPT")
	}

	// Per-service chains: always recorded as active, written only when asked.
	if usesExt {
		active[extChain] = struct{}{}
	}
	if usesFW {
		active[fwChain] = struct{}{}
	}
	if usesCluster {
		active[svcChain] = struct{}{}
	}
	if usesLocal {
		active[svlChain] = struct{}{}
	}
	epChains := make([]string, len(c.All))
	for i, ep := range c.All {
		g.scratch = ep.AddrPort().AppendTo(g.scratch[:0])
		epChains[i] = EndpointChainPrefix + hashOf(name, proto, string(g.scratch))
		active[epChains[i]] = struct{}{}
	}
	if !write {
		return
	}
	nc := &g.natChains

	if pc.HasInternal && (st.MasqueradeAll || st.ClusterCIDR.IsValid()) {
		g.rule(nr, pc.Internal)
		comment(nr, name, " cluster IP")
		g.match(nr, proto, sp.ClusterIP, sp.Port)
		if !st.MasqueradeAll {
			nr.WriteString(" ! -s ")
			nr.WriteString(st.ClusterCIDR.String())
		}
		jump(nr, ChainMarkMasq)
	}

	if usesExt {
		chainLine(nc, extChain)
		if !extLocal {
			g.rule(nr, extChain)
			comment(nr, "masquerade traffic for ", name+" external destinations")
			jump(nr, ChainMarkMasq)
		} else {
			if st.ClusterCIDR.IsValid() {
				g.rule(nr, extChain)
				comment(nr, "pod traffic for ", name+" external destinations")
				nr.WriteString(" -s ")
				nr.WriteString(st.ClusterCIDR.String())
				jump(nr, svcChain)
			}
			g.rule(nr, extChain)
			comment(nr, "masquerade LOCAL traffic for ", name+" external destinations")
			nr.WriteString(" -m addrtype --src-type LOCAL")
			jump(nr, ChainMarkMasq)
			g.rule(nr, extChain)
			comment(nr, "route LOCAL traffic for ", name+" external destinations")
			nr.WriteString(" -m addrtype --src-type LOCAL")
			jump(nr, svcChain)
		}
		if pc.HasExternal {
			g.rule(nr, extChain)
			jump(nr, pc.External)
		}
	}

	if usesFW {
		chainLine(nc, fwChain)
		allowFromNode := false
		for _, cidr := range sp.LoadBalancerSourceRanges {
			g.rule(nr, fwChain)
			comment(nr, name, " loadbalancer IP")
			nr.WriteString(" -s ")
			nr.WriteString(cidr.String())
			jump(nr, extChain)
			for _, nip := range st.NodeIPs {
				if cidr.Contains(nip) {
					allowFromNode = true
				}
			}
		}
		if allowFromNode {
			for _, ip := range sp.LoadBalancerIPs {
				g.rule(nr, fwChain)
				comment(nr, name, " loadbalancer IP")
				nr.WriteString(" -s ")
				g.addr(nr, ip)
				jump(nr, extChain)
			}
		}
		g.rule(nr, fwChain)
		comment(nr, "other traffic to ", name+" will be dropped by KUBE-PROXY-FIREWALL")
		nr.WriteByte('\n')
	}

	chainOf := func(ep backends.Endpoint) string {
		i, _ := slices.BinarySearchFunc(c.All, ep, func(a, b backends.Endpoint) int {
			if x := a.IP.Compare(b.IP); x != 0 {
				return x
			}
			return int(a.Port) - int(b.Port)
		})
		return epChains[i]
	}
	if usesCluster {
		chainLine(nc, svcChain)
		g.toEndpoints(sp, name, svcChain, c.Cluster, chainOf, large)
	}
	if usesLocal {
		chainLine(nc, svlChain)
		g.toEndpoints(sp, name, svlChain, c.Local, chainOf, large)
	}

	for i, ep := range c.All {
		sep := epChains[i]
		chainLine(nc, sep)
		g.rule(nr, sep)
		if !large {
			nr.WriteString(" -m comment --comment ")
			nr.WriteString(name)
		}
		nr.WriteString(" -s ")
		g.addr(nr, ep.IP)
		jump(nr, ChainMarkMasq)
		g.rule(nr, sep)
		if !large {
			nr.WriteString(" -m comment --comment ")
			nr.WriteString(name)
		}
		if sp.AffinityClientIP {
			nr.WriteString(" -m recent --name ")
			nr.WriteString(sep)
			nr.WriteString(" --set")
		}
		nr.WriteString(" -m ")
		nr.WriteString(proto)
		nr.WriteString(" -p ")
		nr.WriteString(proto)
		nr.WriteString(" -j DNAT --to-destination ")
		g.scratch = ep.AddrPort().AppendTo(g.scratch[:0])
		nr.Write(g.scratch)
		nr.WriteByte('\n')
	}
}

// toEndpoints writes a SVC or SVL chain: affinity checks, then the random choice, as
// kube-proxy's writeServiceToEndpointRules.
func (g *Generator) toEndpoints(sp *backends.ServicePort, name, chain string, eps []backends.Endpoint, chainOf func(backends.Endpoint) string, large bool) {
	nr := &g.natRules
	epComment := func(ep backends.Endpoint) {
		if large {
			return
		}
		nr.WriteString(` -m comment --comment "`)
		nr.WriteString(name)
		nr.WriteString(" -> ")
		g.scratch = ep.AddrPort().AppendTo(g.scratch[:0])
		nr.Write(g.scratch)
		nr.WriteByte('"')
	}
	if sp.AffinityClientIP {
		timeout := sp.AffinityTimeoutSeconds
		if timeout == 0 {
			timeout = DefaultAffinityTimeoutSeconds
		}
		for _, ep := range eps {
			sep := chainOf(ep)
			g.rule(nr, chain)
			epComment(ep)
			nr.WriteString(" -m recent --name ")
			nr.WriteString(sep)
			nr.WriteString(" --rcheck --seconds ")
			g.num(nr, timeout)
			nr.WriteString(" --reap")
			jump(nr, sep)
		}
	}
	n := len(eps)
	for i, ep := range eps {
		g.rule(nr, chain)
		epComment(ep)
		if i < n-1 {
			nr.WriteString(" -m statistic --mode random --probability ")
			if g.naive {
				nr.WriteString(g.probability(n)) // the bug iptables@skew reproduces
			} else {
				nr.WriteString(g.probability(n - i))
			}
		}
		jump(nr, chainOf(ep))
	}
}
