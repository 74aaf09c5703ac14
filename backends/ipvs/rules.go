package ipvs

import (
	"fmt"
	"net/netip"
	"strings"
)

// DefaultMasqueradeBit is kube-proxy's default mark bit for masquerading (0x4000).
const DefaultMasqueradeBit = 14

// Chains of the constant iptables ruleset of the IPVS mode.
const (
	// ChainServices (nat) is entered from PREROUTING and OUTPUT: marks for masquerading and
	// accepts service traffic matched by the ipsets.
	ChainServices = "KUBE-SERVICES"
	// ChainPostrouting (nat) masquerades marked traffic and hairpin connections.
	ChainPostrouting = "KUBE-POSTROUTING"
	// ChainMarkMasq (nat) sets the masquerade mark.
	ChainMarkMasq = "KUBE-MARK-MASQ"
	// ChainNodePort (nat: masquerade for node ports; filter: accept health-check ports).
	ChainNodePort = "KUBE-NODE-PORT"
	// ChainLoadBalancer (nat) masquerades load-balancer traffic unless its policy is Local.
	ChainLoadBalancer = "KUBE-LOAD-BALANCER"
	// ChainForward (filter) accepts forwarded service traffic.
	ChainForward = "KUBE-FORWARD"
	// ChainProxyFirewall (filter) sends load-balancer traffic with source ranges to
	// ChainSourceRangesFW.
	ChainProxyFirewall = "KUBE-PROXY-FIREWALL"
	// ChainSourceRangesFW (filter) drops load-balancer traffic from outside the source ranges.
	ChainSourceRangesFW = "KUBE-SOURCE-RANGES-FIREWALL"
	// ChainIPVSFilter (filter) rejects new connections to a kube-ipvs0 address on a port
	// that is no service.
	ChainIPVSFilter = "KUBE-IPVS-FILTER"

	commentClusterIPMasq    = `"Kubernetes service cluster ip + port for masquerade purpose"`
	commentLoadBalancerPort = `"Kubernetes service lb portal"`
)

// Jump is a rule in a built-in chain that enters one of our chains.
type Jump struct {
	// Table, From (built-in chain) and To (our chain).
	Table, From, To string
}

// Rule returns the rule as iptables-save prints it: "-A FROM -j TO".
func (j Jump) Rule() string { return fmt.Sprintf("-A %s -j %s", j.From, j.To) }

// Jumps returns the jumps from built-in chains into the IPVS mode's chains.
func Jumps() []Jump {
	return []Jump{
		{"nat", "PREROUTING", ChainServices},
		{"nat", "OUTPUT", ChainServices},
		{"nat", "POSTROUTING", ChainPostrouting},
		{"filter", "INPUT", ChainNodePort},
		{"filter", "INPUT", ChainProxyFirewall},
		{"filter", "INPUT", ChainIPVSFilter},
		{"filter", "FORWARD", ChainForward},
		{"filter", "FORWARD", ChainProxyFirewall},
	}
}

// Chains returns our chains per table, in the order they are declared.
func Chains() map[string][]string {
	return map[string][]string{
		"nat": {ChainServices, ChainPostrouting, ChainMarkMasq, ChainNodePort, ChainLoadBalancer},
		"filter": {ChainForward, ChainNodePort, ChainProxyFirewall, ChainSourceRangesFW,
			ChainIPVSFilter},
	}
}

// RulesConfig is what the constant ruleset depends on.
type RulesConfig struct {
	// ClusterCIDR: traffic to a ClusterIP from outside it is masqueraded (invalid: only
	// MasqueradeAll applies).
	ClusterCIDR netip.Prefix
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// MasqueradeBit is the mark bit (0x4000 for 14).
	MasqueradeBit int
}

// WriteRules renders the iptables-restore input (for `--noflush`) of the IPVS mode: a
// constant ruleset, the same for 1 or 10,000 services, that matches the ipsets. Declaring
// our chains flushes them, so the input is idempotent; missing jumps from built-in chains
// (missing: iptables-save showed them absent) are inserted at the top.
func WriteRules(b *strings.Builder, c RulesConfig, missing []Jump) (rules int) {
	mark := fmt.Sprintf("%#08x", 1<<c.MasqueradeBit)
	r := func(format string, args ...any) {
		fmt.Fprintf(b, format+"\n", args...)
		rules++
	}
	head := func(table string) {
		fmt.Fprintf(b, "*%s\n", table)
		for _, ch := range Chains()[table] {
			fmt.Fprintf(b, ":%s - [0:0]\n", ch)
		}
	}
	jumps := func(table string) {
		for _, j := range missing {
			if j.Table == table {
				r("-I %s -j %s", j.From, j.To)
			}
		}
	}

	head("nat")
	r("-A %s -m comment --comment %s -m set --match-set %s dst,dst -j %s", ChainServices, commentLoadBalancerPort, SetLoadBalancer, ChainLoadBalancer)
	switch {
	case c.MasqueradeAll:
		r("-A %s -m comment --comment %s -m set --match-set %s dst,dst -j %s", ChainServices, commentClusterIPMasq, SetClusterIP, ChainMarkMasq)
	case c.ClusterCIDR.IsValid():
		r("-A %s ! -s %s -m comment --comment %s -m set --match-set %s dst,dst -j %s", ChainServices, c.ClusterCIDR, commentClusterIPMasq, SetClusterIP, ChainMarkMasq)
	}
	r("-A %s -m comment --comment \"Kubernetes service external ip + port for masquerade and filter purpose\" -m set --match-set %s dst,dst -j %s", ChainServices, SetExternalIP, ChainMarkMasq)
	r("-A %s -m comment --comment \"Kubernetes service external ip + port for masquerade and filter purpose\" -m set --match-set %s dst,dst -m addrtype --dst-type LOCAL -j ACCEPT", ChainServices, SetExternalIP)
	r("-A %s -m comment --comment \"Kubernetes service external ip + port with local policy\" -m set --match-set %s dst,dst -j ACCEPT", ChainServices, SetExternalIPLocal)
	r("-A %s -m addrtype --dst-type LOCAL -j %s", ChainServices, ChainNodePort)
	r("-A %s -m set --match-set %s dst,dst -j ACCEPT", ChainServices, SetClusterIP)
	r("-A %s -m set --match-set %s dst,dst -j ACCEPT", ChainServices, SetLoadBalancer)
	r("-A %s -m comment --comment \"Kubernetes service load balancer ip + port with local policy\" -m set --match-set %s dst,dst -j RETURN", ChainLoadBalancer, SetLoadBalancerLocal)
	r("-A %s -j %s", ChainLoadBalancer, ChainMarkMasq)
	for _, p := range []struct{ proto, local, all string }{{"tcp", SetNodePortLocalTCP, SetNodePortTCP}, {"udp", SetNodePortLocalUDP, SetNodePortUDP}} {
		r("-A %s -p %s -m comment --comment \"Kubernetes nodeport %s port with local policy\" -m set --match-set %s dst -j RETURN", ChainNodePort, p.proto, strings.ToUpper(p.proto), p.local)
		r("-A %s -p %s -m comment --comment \"Kubernetes nodeport %s port for masquerade purpose\" -m set --match-set %s dst -j %s", ChainNodePort, p.proto, strings.ToUpper(p.proto), p.all, ChainMarkMasq)
	}
	r("-A %s -m comment --comment \"Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose\" -m set --match-set %s dst,dst,src -j MASQUERADE", ChainPostrouting, SetLoopBack)
	r("-A %s -m mark ! --mark %s/%s -j RETURN", ChainPostrouting, mark, mark)
	r("-A %s -j MARK --xor-mark %s", ChainPostrouting, mark)
	r("-A %s -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully", ChainPostrouting)
	r("-A %s -j MARK --or-mark %s", ChainMarkMasq, mark)
	jumps("nat")
	b.WriteString("COMMIT\n")

	head("filter")
	r("-A %s -m conntrack --ctstate INVALID -j DROP", ChainForward)
	r("-A %s -m comment --comment \"kubernetes forwarding rules\" -m mark --mark %s/%s -j ACCEPT", ChainForward, mark, mark)
	r("-A %s -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", ChainForward)
	r("-A %s -m comment --comment \"Kubernetes health check node port\" -m set --match-set %s dst -j ACCEPT", ChainNodePort, SetHealthCheckNodePort)
	r("-A %s -m comment --comment \"Kubernetes service load balancer ip + port with source range\" -m set --match-set %s dst,dst -j %s", ChainProxyFirewall, SetLoadBalancerFW, ChainSourceRangesFW)
	r("-A %s -m set --match-set %s dst,dst,src -j RETURN", ChainSourceRangesFW, SetLoadBalancerSourceCIDR)
	r("-A %s -m set --match-set %s dst,dst,src -j RETURN", ChainSourceRangesFW, SetLoadBalancerSourceIP)
	r("-A %s -j DROP", ChainSourceRangesFW)
	for _, set := range []string{SetLoadBalancer, SetClusterIP, SetExternalIP, SetExternalIPLocal} {
		r("-A %s -m set --match-set %s dst,dst -j RETURN", ChainIPVSFilter, set)
	}
	r("-A %s -m set --match-set %s dst -j RETURN", ChainIPVSFilter, SetHealthCheckNodePort)
	r("-A %s -m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT", ChainIPVSFilter, SetIPVSIPs)
	jumps("filter")
	b.WriteString("COMMIT\n")
	return rules
}

// WriteCleanup renders iptables-restore input (for `--noflush`) that removes the given
// jumps and then flushes and deletes all our chains.
func WriteCleanup(b *strings.Builder, present []Jump) {
	for _, table := range []string{"nat", "filter"} {
		fmt.Fprintf(b, "*%s\n", table)
		for _, ch := range Chains()[table] {
			fmt.Fprintf(b, ":%s - [0:0]\n", ch)
		}
		for _, j := range present {
			if j.Table == table {
				fmt.Fprintf(b, "-D %s -j %s\n", j.From, j.To)
			}
		}
		for _, ch := range Chains()[table] {
			fmt.Fprintf(b, "-X %s\n", ch)
		}
		b.WriteString("COMMIT\n")
	}
}
