// Package conntrack deletes the UDP conntrack entries that a proxy change leaves stale, as
// kube-proxy does after every sync: when a UDP endpoint goes away, entries whose replies
// come from it (for every address of the service) are deleted, or clients on a fixed
// source port keep sending to a dead pod; when a UDP service gets its first endpoint, its
// entries are deleted, since they were made for the REJECT. Backends reach it through
// backends/synced, after every successful sync.
package conntrack

import (
	"context"
	"net/netip"

	"kpbench.dev/kpbench/backends"
)

// ProtoUDP is IPPROTO_UDP.
const ProtoUDP = 17

// Flow is the part of a conntrack entry that cleanup matches on.
type Flow struct {
	// Proto is the L4 protocol number (17 for UDP).
	Proto uint8
	// OrigDst is the original destination (the service address the client used);
	// ReplySrc the source of replies (the endpoint after DNAT).
	OrigSrc, OrigDst, ReplySrc netip.AddrPort
}

// Table deletes conntrack entries in a node's namespace. The real one (Namespace) dials
// netlink there; tests use a fake table.
type Table interface {
	// DeleteMatching deletes every entry for which match is true and returns how many.
	DeleteMatching(ctx context.Context, match func(Flow) bool) (int, error)
}

// Filter selects UDP entries whose original destination is one of Dsts and, when ReplySrc
// is valid, whose replies come from ReplySrc.
type Filter struct {
	Dsts     []netip.AddrPort
	ReplySrc netip.AddrPort
}

// Match reports whether the filter selects fl.
func (f Filter) Match(fl Flow) bool {
	if fl.Proto != ProtoUDP {
		return false
	}
	if f.ReplySrc.IsValid() && fl.ReplySrc != f.ReplySrc {
		return false
	}
	for _, d := range f.Dsts {
		if fl.OrigDst == d {
			return true
		}
	}
	return false
}

// serviceDsts returns every address:port a client may use for sp: ClusterIP, externalIPs
// and load-balancer IPs on the service port, and the node IPs on the NodePort.
func serviceDsts(sp *backends.ServicePort, nodeIPs []netip.Addr) []netip.AddrPort {
	dsts := []netip.AddrPort{netip.AddrPortFrom(sp.ClusterIP, uint16(sp.Port))}
	for _, ip := range sp.ExternalIPs {
		dsts = append(dsts, netip.AddrPortFrom(ip, uint16(sp.Port)))
	}
	for _, ip := range sp.LoadBalancerIPs {
		dsts = append(dsts, netip.AddrPortFrom(ip, uint16(sp.Port)))
	}
	if sp.NodePort != 0 {
		for _, ip := range nodeIPs {
			dsts = append(dsts, netip.AddrPortFrom(ip, uint16(sp.NodePort)))
		}
	}
	return dsts
}

// StaleUDP compares the last applied UDP service ports with the new state, as
// kube-proxy does after a sync: an endpoint that is no longer used has its entries for
// the service addresses deleted (or clients keep sending to a dead pod); a service that
// had no endpoints and now has some has all its entries deleted (they were cached for
// the REJECT).
func StaleUDP(old map[backends.ServicePortName]*backends.ServicePort, cur *backends.State) []Filter {
	var out []Filter
	seen := make(map[backends.ServicePortName]bool, len(cur.Services))
	for _, sp := range cur.Services {
		if sp.Name.Protocol != backends.UDP {
			continue
		}
		seen[sp.Name] = true
		now := backends.CategorizeEndpoints(sp).All
		prev, ok := old[sp.Name]
		var before []backends.Endpoint
		if ok {
			before = backends.CategorizeEndpoints(prev).All
		}
		if len(before) == 0 && len(now) > 0 {
			out = append(out, Filter{Dsts: serviceDsts(sp, cur.NodeIPs)})
			continue
		}
		if !ok {
			continue
		}
		for _, ep := range before {
			if !containsEndpoint(now, ep) {
				out = append(out, Filter{Dsts: serviceDsts(prev, cur.NodeIPs), ReplySrc: ep.AddrPort()})
			}
		}
	}
	for name, prev := range old {
		if name.Protocol != backends.UDP || seen[name] {
			continue
		}
		for _, ep := range backends.CategorizeEndpoints(prev).All {
			out = append(out, Filter{Dsts: serviceDsts(prev, cur.NodeIPs), ReplySrc: ep.AddrPort()})
		}
	}
	return out
}

func containsEndpoint(eps []backends.Endpoint, ep backends.Endpoint) bool {
	for _, e := range eps {
		if e.IP == ep.IP && e.Port == ep.Port {
			return true
		}
	}
	return false
}

// Clear deletes the entries the filters select and returns how many.
func Clear(ctx context.Context, ct Table, filters []Filter) (int, error) {
	if len(filters) == 0 {
		return 0, nil
	}
	return ct.DeleteMatching(ctx, func(fl Flow) bool {
		for _, f := range filters {
			if f.Match(fl) {
				return true
			}
		}
		return false
	})
}
