package nftables

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"kpbench.dev/kpbench/backends"
)

// tableComment is the comment of table ip kube-proxy.
const tableComment = "rules for kube-proxy"

// masqueradeMark is kube-proxy's default masquerade mark (bit 14), written as kube-proxy
// writes it (fmt "%#08x" of 1<<14); masqueradeRule sets it, inline where masquerading is
// due (v1.37 has no mark-for-masquerade chain), and the masquerading chain acts on it.
const (
	masqueradeMark = "0x004000"
	masqueradeRule = "mark set mark or " + masqueradeMark
)

// config is the node-wide part of the desired state. The fixed rules depend on it, so a
// change of it makes the next sync full.
type config struct {
	// nodeIPs are the node's IPv4 addresses: they fill nodeport-ips. Empty means
	// "NodePorts on every local address" (fib daddr type local), like kube-proxy with no
	// --nodeport-addresses.
	nodeIPs []netip.Addr
	// clusterCIDR is the pod network (invalid: none, so only masqueradeAll masquerades
	// ClusterIP traffic).
	clusterCIDR   netip.Prefix
	masqueradeAll bool
	// serviceCIDRs are the IPv4 ranges of ClusterIPs: traffic to an unallocated address
	// in them is dropped (kube-proxy v1.37's cluster-ips-check).
	serviceCIDRs []netip.Prefix
}

// configOf extracts the node-wide settings of s, keeping IPv4 only.
func configOf(s *backends.State) config {
	c := config{masqueradeAll: s.MasqueradeAll}
	for _, ip := range s.NodeIPs {
		if ip.Is4() && !ip.IsLoopback() {
			c.nodeIPs = append(c.nodeIPs, ip)
		}
	}
	if s.ClusterCIDR.IsValid() && s.ClusterCIDR.Addr().Is4() {
		c.clusterCIDR = s.ClusterCIDR.Masked()
	}
	for _, p := range s.ServiceCIDRs {
		if p.IsValid() && p.Addr().Is4() {
			c.serviceCIDRs = append(c.serviceCIDRs, p.Masked())
		}
	}
	return c
}

func (c config) equal(o config) bool {
	return slices.Equal(c.nodeIPs, o.nodeIPs) && c.clusterCIDR == o.clusterCIDR && c.masqueradeAll == o.masqueradeAll &&
		slices.Equal(c.serviceCIDRs, o.serviceCIDRs)
}

// baseChain is a chain attached to a netfilter hook.
type baseChain struct {
	name      string
	chainType knftables.BaseChainType
	hook      knftables.BaseChainHook
	priority  knftables.BaseChainPriority
}

// baseChains are kube-proxy v1.37's base chains: the two pre-DNAT filter chains
// (dstnat-10) see the service IP for loadBalancerSourceRanges; the others run at filter
// priority, after DNAT, where only traffic that no service took still has a service IP.
func baseChains() []baseChain {
	return []baseChain{
		{filterPreroutingPreDNATChain, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
		{filterOutputPreDNATChain, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
		{filterInputChain, knftables.FilterType, knftables.InputHook, knftables.FilterPriority},
		{filterForwardChain, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority},
		{filterOutputChain, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority},
		{natPreroutingChain, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
		{natOutputChain, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
		{natPostroutingChain, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
	}
}

// jumpChains are the regular chains jumped to from base chains, with the match guarding
// the jump.
func jumpChains() []jumpChain {
	return []jumpChain{
		// reject is only valid in input/forward/output before kernel 5.9, hence the split.
		{nodePortEndpointsCheckChain, filterInputChain, "ct state new"},
		{serviceEndpointsCheckChain, filterInputChain, "ct state new"},
		{serviceEndpointsCheckChain, filterForwardChain, "ct state new"},
		{serviceEndpointsCheckChain, filterOutputChain, "ct state new"},
		{firewallCheckChain, filterPreroutingPreDNATChain, "ct state new"},
		{firewallCheckChain, filterOutputPreDNATChain, "ct state new"},
		{servicesChain, natOutputChain, ""},
		{servicesChain, natPreroutingChain, ""},
		{masqueradingChain, natPostroutingChain, ""},
		{clusterIPsCheckChain, filterForwardChain, "ct state new"},
		{clusterIPsCheckChain, filterOutputChain, "ct state new"},
	}
}

// jumpChain is a jump from base chain src to regular chain dst, guarded by match.
type jumpChain struct{ dst, src, match string }

// writer wraps a transaction and counts what it writes.
type writer struct {
	tx *knftables.Transaction
	// rules counts rules and elements added or deleted.
	rules int
}

func (w *writer) rule(chain, rule string) {
	w.tx.Add(&knftables.Rule{Chain: chain, Rule: rule})
	w.rules++
}

func (w *writer) commentedRule(chain, rule, comment string) {
	w.tx.Add(&knftables.Rule{Chain: chain, Rule: rule, Comment: knftables.PtrTo(comment)})
	w.rules++
}

// ensureChain creates chain if needed and empties it.
func (w *writer) ensureChain(chain string) {
	w.tx.Add(&knftables.Chain{Name: chain})
	w.tx.Flush(&knftables.Chain{Name: chain})
}

// writeSetup writes the fixed part of the ruleset: the table, base chains, dispatch
// chains, the shared sets and maps (flushed: the caller refills them), and the rules that
// do not depend on services. recreateBaseChains adds and deletes every base chain first,
// so that base chains left with other properties by an earlier run are recreated
// (kube-proxy does this once per process).
//
// Equivalent to the first part of `nft -f` of kube-proxy's full ruleset.
func writeSetup(w *writer, cfg config, recreateBaseChains bool) {
	tx := w.tx
	tx.Add(&knftables.Table{Comment: knftables.PtrTo(tableComment)})
	if recreateBaseChains {
		for _, bc := range baseChains() {
			tx.Add(&knftables.Chain{Name: bc.name})
			tx.Delete(&knftables.Chain{Name: bc.name})
		}
	}
	for _, bc := range baseChains() {
		c := &knftables.Chain{
			Name:     bc.name,
			Type:     knftables.PtrTo(bc.chainType),
			Hook:     knftables.PtrTo(bc.hook),
			Priority: knftables.PtrTo(bc.priority),
		}
		tx.Add(c)
		tx.Flush(c)
	}
	created := map[string]bool{}
	ensure := func(chain string) {
		if !created[chain] {
			created[chain] = true
			w.ensureChain(chain)
		}
	}
	for _, jc := range jumpChains() {
		ensure(jc.dst)
		r := "jump " + jc.dst
		if jc.match != "" {
			r = jc.match + " " + r
		}
		w.rule(jc.src, r)
	}
	for _, c := range []string{servicesChain, clusterIPsCheckChain, masqueradingChain} {
		ensure(c)
	}

	// Hairpin traffic (a pod reaching itself through a service) is masqueraded by its
	// connection's addresses, as kube-proxy v1.37 does, instead of a rule per endpoint
	// chain: most services then need no endpoint chains at all (see planService).
	tx.Add(&knftables.Set{Name: hairpinSet, Type: "ipv4_addr . ipv4_addr . inet_proto . inet_service", Comment: knftables.PtrTo("service hairpin connections")})
	w.rule(masqueradingChain, "mark and "+masqueradeMark+" != 0 mark set mark xor "+masqueradeMark+" masquerade fully-random")
	w.rule(masqueradingChain, "ct status dnat ip saddr . ip daddr . meta l4proto . th dport @"+hairpinSet+" masquerade fully-random")

	tx.Add(&knftables.Set{Name: clusterIPsSet, Type: "ipv4_addr", Comment: knftables.PtrTo("Active ClusterIPs")})
	w.commentedRule(clusterIPsCheckChain, "ip daddr @"+clusterIPsSet+" reject", "Reject traffic to invalid ports of ClusterIPs")
	if len(cfg.serviceCIDRs) > 0 {
		cidrs := make([]string, len(cfg.serviceCIDRs))
		for i, p := range cfg.serviceCIDRs {
			cidrs[i] = p.String()
		}
		w.commentedRule(clusterIPsCheckChain, "ip daddr { "+strings.Join(cidrs, ",")+" } drop", "Drop traffic to unallocated ClusterIPs")
	}

	// nodeport-ips: the node's addresses, or (none known) deleted, and NodePorts then
	// match every local address. Add+delete deletes whether or not it exists.
	tx.Add(&knftables.Set{Name: nodePortIPsSet, Type: "ipv4_addr", Comment: knftables.PtrTo("IPs that accept NodePort traffic")})
	if len(cfg.nodeIPs) == 0 {
		tx.Delete(&knftables.Set{Name: nodePortIPsSet})
	} else {
		tx.Flush(&knftables.Set{Name: nodePortIPsSet})
		for _, ip := range cfg.nodeIPs {
			tx.Add(&knftables.Element{Set: nodePortIPsSet, Key: []string{ip.String()}})
			w.rules++
		}
	}

	tx.Add(verdictMap(noEndpointServicesMap, addrPortKey, "vmap to drop or reject packets to services with no endpoints"))
	tx.Add(verdictMap(noEndpointNodePortsMap, portKey, "vmap to drop or reject packets to service nodeports with no endpoints"))
	tx.Add(&knftables.Chain{Name: rejectChain, Comment: knftables.PtrTo("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	tx.Flush(&knftables.Chain{Name: rejectChain})
	w.rule(rejectChain, "reject")
	w.rule(serviceEndpointsCheckChain, "ip daddr . meta l4proto . th dport vmap @"+noEndpointServicesMap)
	if len(cfg.nodeIPs) == 0 {
		w.rule(nodePortEndpointsCheckChain, "ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @"+noEndpointNodePortsMap)
	} else {
		w.rule(nodePortEndpointsCheckChain, "ip daddr @"+nodePortIPsSet+" meta l4proto . th dport vmap @"+noEndpointNodePortsMap)
	}

	tx.Add(verdictMap(firewallIPsMap, addrPortKey, "destinations that are subject to LoadBalancerSourceRanges"))
	ensure(firewallCheckChain)
	w.rule(firewallCheckChain, "ip daddr . meta l4proto . th dport vmap @"+firewallIPsMap)

	tx.Add(verdictMap(serviceIPsMap, addrPortKey, "ClusterIP, ExternalIP and LoadBalancer IP traffic"))
	tx.Add(verdictMap(serviceNodePortsMap, portKey, "NodePort traffic"))
	// ClusterIP traffic from outside the pod network is masqueraded by one rule for
	// every ClusterIP, not one per service chain (kube-proxy v1.37).
	switch {
	case cfg.masqueradeAll:
		w.commentedRule(servicesChain, "ip daddr @"+clusterIPsSet+" "+masqueradeRule, "masquerade all clusterIP traffic")
	case cfg.clusterCIDR.IsValid():
		w.commentedRule(servicesChain, "ip daddr @"+clusterIPsSet+" ip saddr != "+cfg.clusterCIDR.String()+" "+masqueradeRule, "masquerade clusterIP traffic from outside cluster")
	}
	w.rule(servicesChain, "ip daddr . meta l4proto . th dport vmap @"+serviceIPsMap)
	if len(cfg.nodeIPs) == 0 {
		w.rule(servicesChain, "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @"+serviceNodePortsMap)
	} else {
		w.rule(servicesChain, "ip daddr @"+nodePortIPsSet+" meta l4proto . th dport vmap @"+serviceNodePortsMap)
	}

	tx.Flush(&knftables.Set{Name: clusterIPsSet})
	tx.Flush(&knftables.Set{Name: hairpinSet})
	for _, m := range []string{serviceIPsMap, firewallIPsMap, noEndpointServicesMap, noEndpointNodePortsMap, serviceNodePortsMap} {
		tx.Flush(&knftables.Map{Name: m})
	}
}

// chainPlan is one per-service chain and its rules (with optional comments).
type chainPlan struct {
	name     string
	rules    []string
	comments map[int]string
}

func (c *chainPlan) add(rule string) { c.rules = append(c.rules, rule) }

func (c *chainPlan) addCommented(rule, comment string) {
	if c.comments == nil {
		c.comments = map[int]string{}
	}
	c.comments[len(c.rules)] = comment
	c.rules = append(c.rules, rule)
}

// setPlan is one per-endpoint affinity set.
type setPlan struct {
	name    string
	timeout int32
}

// servicePlan is everything one service port puts in the table: its chains with their
// rules, its affinity sets and its elements in the shared sets and maps.
type servicePlan struct {
	chains []*chainPlan
	sets   []setPlan
	elems  []element
	// cat is the endpoint categorisation the plan was built from.
	cat backends.Categorized
}

// chainNames returns the names of p's chains.
func (p *servicePlan) chainNames() []string {
	names := make([]string, len(p.chains))
	for i, c := range p.chains {
		names[i] = c.name
	}
	return names
}

// ipv4Only returns sp restricted to IPv4 (the table is family ip), or nil when the
// ClusterIP itself is not IPv4. sp is returned as is when it has nothing else.
func ipv4Only(sp *backends.ServicePort) *backends.ServicePort {
	if !sp.ClusterIP.Is4() {
		return nil
	}
	clean := true
	for _, a := range sp.ExternalIPs {
		clean = clean && a.Is4()
	}
	for _, a := range sp.LoadBalancerIPs {
		clean = clean && a.Is4()
	}
	for _, p := range sp.LoadBalancerSourceRanges {
		clean = clean && p.Addr().Is4()
	}
	for _, ep := range sp.Endpoints {
		clean = clean && ep.IP.Is4()
	}
	if clean {
		return sp
	}
	c := *sp
	notV4 := func(a netip.Addr) bool { return !a.Is4() }
	c.ExternalIPs = slices.DeleteFunc(slices.Clone(sp.ExternalIPs), notV4)
	c.LoadBalancerIPs = slices.DeleteFunc(slices.Clone(sp.LoadBalancerIPs), notV4)
	c.LoadBalancerSourceRanges = slices.DeleteFunc(slices.Clone(sp.LoadBalancerSourceRanges),
		func(p netip.Prefix) bool { return !p.Addr().Is4() })
	c.Endpoints = slices.DeleteFunc(slices.Clone(sp.Endpoints), func(ep backends.Endpoint) bool { return !ep.IP.Is4() })
	return &c
}

// planService computes the chains, sets and elements of one service port, following
// kube-proxy's syncProxyRules for one svcPortMap entry. sp must be IPv4 only.
func planService(cfg config, sp *backends.ServicePort) *servicePlan {
	p := &servicePlan{cat: backends.CategorizeEndpoints(sp)}
	cat := p.cat
	proto := sp.Name.Protocol.Lower()
	port := strconv.Itoa(int(sp.Port))
	nameStr := sp.Name.UpstreamString()
	base := serviceNameBase(sp.Name)
	clusterChain := clusterChainPrefix + base
	localChain := localChainPrefix + base
	externalChain := externalChainPrefix + base
	fwChain := firewallChainPrefix + base

	type epInfo struct {
		ep            backends.Endpoint
		chain, affset string
	}
	// Endpoint chains exist only with session affinity (they record the client in the
	// endpoint's affinity set); otherwise the service chain DNATs itself (kube-proxy v1.37).
	eps := make(map[backends.Endpoint]epInfo, len(cat.All))
	var epChains []*chainPlan
	for _, ep := range cat.All {
		nb := endpointNameBase(sp.Name, ep)
		info := epInfo{ep: ep, chain: endpointChainPrefix + nb, affset: affinitySetPrefix + nb}
		eps[ep] = info
		if sp.AffinityClientIP {
			epChains = append(epChains, &chainPlan{name: info.chain})
		}
	}

	hasEndpoints := cat.HasAnyEndpoints
	usesCluster := len(cat.Cluster) > 0
	usesLocal := len(cat.Local) > 0

	pc := cat.PolicyChains(sp, clusterChain, localChain)
	usesExternal := hasEndpoints && sp.ExternallyAccessible()
	usesFW := len(sp.LoadBalancerIPs) > 0 && len(sp.LoadBalancerSourceRanges) > 0

	// plan adds the chain name to the plan when it is used (nil when not).
	plan := func(used bool, name string) *chainPlan {
		if !used {
			return nil
		}
		c := &chainPlan{name: name}
		p.chains = append(p.chains, c)
		return c
	}
	cluster := plan(usesCluster, clusterChain)
	local := plan(usesLocal, localChain)
	external := plan(usesExternal, externalChain)
	fw := plan(usesFW, fwChain)
	p.chains = append(p.chains, epChains...)

	// Verdicts for the filter checks: reject without any endpoint, drop when a Local
	// policy has no local endpoint.
	internalVerdict, externalVerdict := "", ""
	if !hasEndpoints {
		internalVerdict, externalVerdict = "goto "+rejectChain, "goto "+rejectChain
	} else {
		if !pc.HasInternal {
			internalVerdict = "drop"
		}
		if !pc.HasExternal {
			externalVerdict = "drop"
		}
	}
	svcKey := func(ip netip.Addr) string { return ip.String() + " . " + proto + " . " + port }

	// Elements.
	p.elems = append(p.elems, element{container: clusterIPsSet, isSet: true, key: sp.ClusterIP.String()})
	for _, ep := range cat.All {
		if ep.IsLocal {
			ip := ep.IP.String()
			p.elems = append(p.elems, element{container: hairpinSet, isSet: true, key: ip + " . " + ip + " . " + proto + " . " + strconv.Itoa(int(ep.Port))})
		}
	}
	if pc.HasInternal {
		p.elems = append(p.elems, element{container: serviceIPsMap, key: svcKey(sp.ClusterIP), value: "goto " + pc.Internal})
	} else {
		p.elems = append(p.elems, element{container: noEndpointServicesMap, key: svcKey(sp.ClusterIP), value: internalVerdict, comment: nameStr})
	}
	for _, ip := range sp.ExternalIPs {
		if hasEndpoints {
			p.elems = append(p.elems, element{container: serviceIPsMap, key: svcKey(ip), value: "goto " + externalChain})
		}
		if !pc.HasExternal {
			p.elems = append(p.elems, element{container: noEndpointServicesMap, key: svcKey(ip), value: externalVerdict, comment: nameStr})
		}
	}
	for _, ip := range sp.LoadBalancerIPs {
		if hasEndpoints {
			p.elems = append(p.elems, element{container: serviceIPsMap, key: svcKey(ip), value: "goto " + externalChain})
		}
		if usesFW {
			p.elems = append(p.elems, element{container: firewallIPsMap, key: svcKey(ip), value: "goto " + fwChain})
		}
		if !pc.HasExternal {
			p.elems = append(p.elems, element{container: noEndpointServicesMap, key: svcKey(ip), value: externalVerdict, comment: nameStr})
		}
	}
	if sp.NodePort != 0 {
		npKey := proto + " . " + strconv.Itoa(int(sp.NodePort))
		if hasEndpoints {
			// NodePorts are not subject to loadBalancerSourceRanges (as in kube-proxy).
			p.elems = append(p.elems, element{container: serviceNodePortsMap, key: npKey, value: "goto " + externalChain})
		}
		if !pc.HasExternal {
			p.elems = append(p.elems, element{container: noEndpointNodePortsMap, key: npKey, value: externalVerdict, comment: nameStr})
		}
	}

	// Internal traffic from outside the pod network is masqueraded in the services chain
	// (writeSetup), for every ClusterIP at once.

	// External traffic: everything external goes through the external chain.
	if usesExternal {
		if !sp.UsesLocalExternal() {
			// Cluster policy: endpoints may be on other nodes, masquerade.
			external.addCommented(masqueradeRule, "masquerade")
		} else {
			// Local policy keeps the client address. Pods and the node itself are
			// short-circuited to the cluster-wide endpoints, as upstream does
			// (CategorizeEndpoints keeps the cluster endpoints of every externally
			// accessible port, so that chain exists; the local one is a fallback).
			short := ""
			switch {
			case usesCluster:
				short = clusterChain
			case usesLocal:
				short = localChain
			}
			if short != "" && cfg.clusterCIDR.IsValid() {
				external.addCommented("ip saddr "+cfg.clusterCIDR.String()+" goto "+short, "short-circuit pod traffic")
			}
			external.addCommented("fib saddr type local "+masqueradeRule, "masquerade local traffic")
			if short != "" {
				external.addCommented("fib saddr type local goto "+short, "short-circuit local traffic")
			}
		}
		if pc.HasExternal {
			external.add("goto " + pc.External)
		}
	}

	if usesFW {
		sources := make([]string, 0, len(sp.LoadBalancerSourceRanges)+len(sp.LoadBalancerIPs))
		allowFromNode := false
		for _, cidr := range sp.LoadBalancerSourceRanges {
			sources = append(sources, cidr.String())
			for _, nip := range cfg.nodeIPs {
				allowFromNode = allowFromNode || cidr.Contains(nip)
			}
		}
		// A VIP that is local on the node: requests from the node loop back with the VIP
		// as source, so let those through too.
		if allowFromNode {
			for _, ip := range sp.LoadBalancerIPs {
				sources = append(sources, ip.String())
			}
		}
		fw.add("ip saddr != { " + strings.Join(sources, " , ") + " } drop")
	}

	if sp.AffinityClientIP {
		for _, ep := range cat.All {
			p.sets = append(p.sets, setPlan{name: eps[ep].affset, timeout: sp.AffinityTimeoutSeconds})
		}
	}

	toEndpoints := func(c *chainPlan, list []backends.Endpoint) {
		if !sp.AffinityClientIP {
			c.add(dnatRule(proto, list))
			return
		}
		for _, ep := range list {
			info := eps[ep]
			c.add("ip saddr @" + info.affset + " goto " + info.chain)
		}
		c.add(numgenRule("", "vmap", list, func(ep backends.Endpoint) string { return "goto " + eps[ep].chain }))
	}
	if usesCluster {
		toEndpoints(cluster, cat.Cluster)
	}
	if usesLocal {
		toEndpoints(local, cat.Local)
	}

	for i, c := range epChains {
		ep := cat.All[i]
		c.add("update @" + eps[ep].affset + " { ip saddr }")
		c.add("meta l4proto " + proto + " dnat to " + ep.String())
	}
	return p
}

// dnatRule is the rule of a service chain without affinity: one endpoint is a plain DNAT,
// more are chosen by `numgen random` in an anonymous map of addresses (kube-proxy v1.37's
// writeServiceToEndpointDNATs). Creating an anonymous map costs the kernel a walk of the
// table's sets (name allocation, lookup), which is why one endpoint gets none.
func dnatRule(proto string, list []backends.Endpoint) string {
	if len(list) == 1 {
		return "meta l4proto " + proto + " dnat to " + list[0].String()
	}
	return numgenRule("meta l4proto "+proto+" dnat ip addr . port to ", "map", list, func(ep backends.Endpoint) string {
		return ep.IP.String() + " . " + strconv.Itoa(int(ep.Port))
	})
}

// numgenRule writes prefix + "numgen random mod N <kind> { 0 : value(ep0) , ... }".
func numgenRule(prefix, kind string, list []backends.Endpoint, value func(backends.Endpoint) string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString("numgen random mod ")
	b.WriteString(strconv.Itoa(len(list)))
	b.WriteString(" " + kind + " { ")
	for i, ep := range list {
		if i > 0 {
			b.WriteString(" , ")
		}
		b.WriteString(strconv.Itoa(i))
		b.WriteString(" : ")
		b.WriteString(value(ep))
	}
	b.WriteString(" }")
	return b.String()
}

// affinitySet returns the knftables set of one affinity set plan.
func affinitySet(s setPlan) *knftables.Set {
	timeout := s.timeout
	if timeout <= 0 {
		timeout = 10800 // kube-proxy's default
	}
	return &knftables.Set{
		Name: s.name,
		Type: "ipv4_addr",
		// "dynamic" is not strictly needed, but the kernel adds it on its own and a
		// later add without it would look like a change of flags (kube-proxy's note).
		Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		Timeout: knftables.PtrTo(time.Duration(timeout) * time.Second),
	}
}

// writeRules adds the rules of c to w.
func writeRules(w *writer, c *chainPlan) {
	for i, r := range c.rules {
		if cm, ok := c.comments[i]; ok {
			w.commentedRule(c.name, r, cm)
		} else {
			w.rule(c.name, r)
		}
	}
}

// The keys of the verdict maps: a destination address, protocol and port, or a protocol
// and port (node ports).
const (
	addrPortKey = "ipv4_addr . inet_proto . inet_service"
	portKey     = "inet_proto . inet_service"
)

// verdictMap is a map from key to a verdict (a vmap), with its comment.
//
// Equivalent to: `nft add map ip kube-proxy $name { type $key : verdict; comment "$comment"; }`.
func verdictMap(name, key, comment string) *knftables.Map {
	return &knftables.Map{Name: name, Type: key + " : verdict", Comment: knftables.PtrTo(comment)}
}
