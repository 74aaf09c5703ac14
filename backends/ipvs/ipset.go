package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"kpbench.dev/kpbench/backends"
)

// The ipsets of kube-proxy's IPVS mode. The iptables ruleset (rules.go) matches them, so
// its size does not grow with the number of services.
const (
	// SetClusterIP holds every ClusterIP,proto:port (hash:ip,port).
	SetClusterIP = "KUBE-CLUSTER-IP"
	// SetLoopBack holds endpointIP,proto:port,endpointIP of local endpoints, for hairpin
	// masquerading (hash:ip,port,ip).
	SetLoopBack = "KUBE-LOOP-BACK"
	// SetExternalIP holds externalIP,proto:port with Cluster policy (hash:ip,port).
	SetExternalIP = "KUBE-EXTERNAL-IP"
	// SetExternalIPLocal holds externalIP,proto:port with Local policy (hash:ip,port).
	SetExternalIPLocal = "KUBE-EXTERNAL-IP-LOCAL"
	// SetLoadBalancer holds every load-balancer IP,proto:port (hash:ip,port).
	SetLoadBalancer = "KUBE-LOAD-BALANCER"
	// SetLoadBalancerLocal holds load-balancer IP,proto:port with Local policy (hash:ip,port).
	SetLoadBalancerLocal = "KUBE-LOAD-BALANCER-LOCAL"
	// SetLoadBalancerFW holds load-balancer IP,proto:port with source ranges (hash:ip,port).
	SetLoadBalancerFW = "KUBE-LOAD-BALANCER-FW"
	// SetLoadBalancerSourceCIDR holds lbIP,proto:port,sourceCIDR allowed pairs
	// (hash:ip,port,net).
	SetLoadBalancerSourceCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	// SetLoadBalancerSourceIP holds lbIP,proto:port,sourceIP allowed pairs (hash:ip,port,ip);
	// kube-proxy fills it for node-originated traffic; created empty here.
	SetLoadBalancerSourceIP = "KUBE-LOAD-BALANCER-SOURCE-IP"
	// SetNodePortTCP and SetNodePortUDP hold the node ports per protocol (bitmap:port).
	SetNodePortTCP = "KUBE-NODE-PORT-TCP"
	SetNodePortUDP = "KUBE-NODE-PORT-UDP"
	// SetNodePortLocalTCP and SetNodePortLocalUDP hold node ports with Local policy.
	SetNodePortLocalTCP = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortLocalUDP = "KUBE-NODE-PORT-LOCAL-UDP"
	// SetHealthCheckNodePort holds the health-check node ports (bitmap:port).
	SetHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT"
	// SetIPVSIPs holds every address bound to kube-ipvs0 (hash:ip); traffic to one of them
	// on a port that is no service is rejected (KUBE-IPVS-FILTER).
	SetIPVSIPs = "KUBE-IPVS-IPS"
)

// SetSpec describes one ipset: its name, type and create options.
type SetSpec struct {
	// Name is the set name; Type the ipset type ("hash:ip,port", "bitmap:port", ...).
	Name, Type string
	// Options follow the type on the create line.
	Options string
}

// SetSpecs returns every ipset of the IPVS mode in creation order (IPv4 only).
func SetSpecs() []SetSpec {
	hash := "family inet hashsize 1024 maxelem 1048576"
	bitmap := "range 0-65535"
	return []SetSpec{
		{SetClusterIP, "hash:ip,port", hash},
		{SetLoopBack, "hash:ip,port,ip", hash},
		{SetExternalIP, "hash:ip,port", hash},
		{SetExternalIPLocal, "hash:ip,port", hash},
		{SetLoadBalancer, "hash:ip,port", hash},
		{SetLoadBalancerLocal, "hash:ip,port", hash},
		{SetLoadBalancerFW, "hash:ip,port", hash},
		{SetLoadBalancerSourceCIDR, "hash:ip,port,net", hash},
		{SetLoadBalancerSourceIP, "hash:ip,port,ip", hash},
		{SetNodePortTCP, "bitmap:port", bitmap},
		{SetNodePortUDP, "bitmap:port", bitmap},
		{SetNodePortLocalTCP, "bitmap:port", bitmap},
		{SetNodePortLocalUDP, "bitmap:port", bitmap},
		{SetHealthCheckNodePort, "bitmap:port", bitmap},
		{SetIPVSIPs, "hash:ip", hash},
	}
}

// Sets maps each set name to its entries, sorted and without duplicates.
type Sets map[string][]string

// BuildSets computes the entries of every ipset from a node's state, as kube-proxy's IPVS
// proxier fills them (IPv4 only). SCTP node ports (kube-proxy's hash:ip,port SCTP sets) are not modelled.
func BuildSets(st *backends.State) Sets {
	s := Sets{}
	for _, spec := range SetSpecs() {
		s[spec.Name] = nil
	}
	add := func(set, entry string) { s[set] = append(s[set], entry) }
	for _, sp := range st.Services {
		if !sp.ClusterIP.Is4() {
			continue // IPv4 only, like Build
		}
		proto := sp.Protocol().Lower()
		ipPort := func(ip netip.Addr, port int32) string { return fmt.Sprintf("%s,%s:%d", ip, proto, port) }
		add(SetClusterIP, ipPort(sp.ClusterIP, sp.Port))
		add(SetIPVSIPs, sp.ClusterIP.String())
		for _, ep := range sp.Endpoints {
			if ep.IsLocal && ep.IP.Is4() {
				add(SetLoopBack, fmt.Sprintf("%s,%s:%d,%s", ep.IP, proto, ep.Port, ep.IP))
			}
		}
		for _, ip := range sp.ExternalIPs {
			if !ip.Is4() {
				continue
			}
			add(SetIPVSIPs, ip.String())
			if sp.ExternalPolicyLocal {
				add(SetExternalIPLocal, ipPort(ip, sp.Port))
			} else {
				add(SetExternalIP, ipPort(ip, sp.Port))
			}
		}
		for _, ip := range sp.LoadBalancerIPs {
			if !ip.Is4() {
				continue
			}
			add(SetIPVSIPs, ip.String())
			add(SetLoadBalancer, ipPort(ip, sp.Port))
			if sp.ExternalPolicyLocal {
				add(SetLoadBalancerLocal, ipPort(ip, sp.Port))
			}
			if len(sp.LoadBalancerSourceRanges) > 0 {
				add(SetLoadBalancerFW, ipPort(ip, sp.Port))
				for _, cidr := range sp.LoadBalancerSourceRanges {
					if !cidr.Addr().Is4() {
						continue
					}
					add(SetLoadBalancerSourceCIDR, fmt.Sprintf("%s,%s", ipPort(ip, sp.Port), cidr))
				}
			}
		}
		if sp.NodePort != 0 {
			port := fmt.Sprint(sp.NodePort)
			switch sp.Protocol() {
			case backends.TCP:
				add(SetNodePortTCP, port)
				if sp.UsesLocalExternal() {
					add(SetNodePortLocalTCP, port)
				}
			case backends.UDP:
				add(SetNodePortUDP, port)
				if sp.UsesLocalExternal() {
					add(SetNodePortLocalUDP, port)
				}
			}
		}
		if sp.HealthCheckNodePort != 0 {
			add(SetHealthCheckNodePort, fmt.Sprint(sp.HealthCheckNodePort))
		}
	}
	for name, entries := range s {
		slices.Sort(entries)
		s[name] = slices.Compact(entries)
	}
	return s
}

// WriteRestore renders `ipset restore` input that creates every set (`-exist`, so an
// existing set is kept) and, for each set in only (all sets when only is nil), flushes it
// and adds its entries. The result is idempotent.
//
// Equivalent to: `ipset restore` of `create $set $type $opts -exist; flush $set; add ...`.
func (s Sets) WriteRestore(b *strings.Builder, only map[string]bool) (entries int) {
	for _, spec := range SetSpecs() {
		fmt.Fprintf(b, "create %s %s %s -exist\n", spec.Name, spec.Type, spec.Options)
	}
	for _, spec := range SetSpecs() {
		if only != nil && !only[spec.Name] {
			continue
		}
		fmt.Fprintf(b, "flush %s\n", spec.Name)
		for _, e := range s[spec.Name] {
			fmt.Fprintf(b, "add %s %s\n", spec.Name, e)
			entries++
		}
	}
	return entries
}

// ChangedSets returns the names of sets whose entries differ between old and s (every set
// when old is nil).
func (s Sets) ChangedSets(old Sets) map[string]bool {
	changed := map[string]bool{}
	for _, spec := range SetSpecs() {
		if old == nil || !slices.Equal(old[spec.Name], s[spec.Name]) {
			changed[spec.Name] = true
		}
	}
	return changed
}
