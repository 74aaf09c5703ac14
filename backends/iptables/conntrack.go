//go:build linux

package iptables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ti-mo/conntrack"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/lab/netns"
)

// protoUDP is IPPROTO_UDP.
const protoUDP = 17

// Flow is the part of a conntrack entry that cleanup matches on.
type Flow struct {
	// Proto is the L4 protocol number (17 for UDP).
	Proto uint8
	// OrigDst is the original destination (the service address the client used);
	// ReplySrc the source of replies (the endpoint after DNAT).
	OrigSrc, OrigDst, ReplySrc netip.AddrPort
}

// conntracker deletes conntrack entries in the node's namespace. The real one dials
// netlink there; tests use a fake table.
type conntracker interface {
	// DeleteMatching deletes every entry for which match is true and returns how many.
	DeleteMatching(ctx context.Context, match func(Flow) bool) (int, error)
}

// nsConntrack talks to the conntrack table of the namespace at path over netlink.
type nsConntrack struct{ path string }

// DeleteMatching dumps the table and deletes matching entries one by one, on a socket
// opened inside the namespace (lab/netns.Do; the socket stays there).
//
// Equivalent to: `conntrack -D -p udp --orig-dst $svcIP --orig-port-dst $port --reply-src $ep`.
func (c nsConntrack) DeleteMatching(ctx context.Context, match func(Flow) bool) (int, error) {
	deleted := 0
	err := netns.Do(c.path, func() error {
		conn, err := conntrack.Dial(nil)
		if err != nil {
			return fmt.Errorf("conntrack dial: %w", err)
		}
		defer conn.Close()
		flows, err := conn.Dump(nil)
		if err != nil {
			return fmt.Errorf("conntrack dump: %w", err)
		}
		var errs []error
		for _, f := range flows {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fl := Flow{
				Proto:    f.TupleOrig.Proto.Protocol,
				OrigSrc:  netip.AddrPortFrom(f.TupleOrig.IP.SourceAddress, f.TupleOrig.Proto.SourcePort),
				OrigDst:  netip.AddrPortFrom(f.TupleOrig.IP.DestinationAddress, f.TupleOrig.Proto.DestinationPort),
				ReplySrc: netip.AddrPortFrom(f.TupleReply.IP.SourceAddress, f.TupleReply.Proto.SourcePort),
			}
			if !match(fl) {
				continue
			}
			if err := conn.Delete(f); err != nil {
				errs = append(errs, fmt.Errorf("conntrack delete %v: %w", fl, err))
				continue
			}
			deleted++
		}
		return errors.Join(errs...)
	})
	return deleted, err
}

// ctFilter selects UDP entries whose original destination is one of dsts and, when
// replySrc is valid, whose replies come from replySrc.
type ctFilter struct {
	dsts     []netip.AddrPort
	replySrc netip.AddrPort
}

func (f ctFilter) match(fl Flow) bool {
	if fl.Proto != protoUDP {
		return false
	}
	if f.replySrc.IsValid() && fl.ReplySrc != f.replySrc {
		return false
	}
	for _, d := range f.dsts {
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

// staleUDPFilters compares the last applied UDP service ports with the new state, as
// kube-proxy does after a sync: an endpoint that is no longer used has its entries for
// the service addresses deleted (or clients keep sending to a dead pod); a service that
// had no endpoints and now has some has all its entries deleted (they were cached for
// the REJECT).
func staleUDPFilters(old map[backends.ServicePortName]*backends.ServicePort, cur *backends.State) []ctFilter {
	var out []ctFilter
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
			out = append(out, ctFilter{dsts: serviceDsts(sp, cur.NodeIPs)})
			continue
		}
		if !ok {
			continue
		}
		for _, ep := range before {
			if !containsEndpoint(now, ep) {
				out = append(out, ctFilter{dsts: serviceDsts(prev, cur.NodeIPs), replySrc: ep.AddrPort()})
			}
		}
	}
	for name, prev := range old {
		if name.Protocol != backends.UDP || seen[name] {
			continue
		}
		for _, ep := range backends.CategorizeEndpoints(prev).All {
			out = append(out, ctFilter{dsts: serviceDsts(prev, cur.NodeIPs), replySrc: ep.AddrPort()})
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

// clearStaleUDP deletes the conntrack entries the filters select.
func clearStaleUDP(ctx context.Context, ct conntracker, filters []ctFilter) (int, error) {
	if len(filters) == 0 {
		return 0, nil
	}
	return ct.DeleteMatching(ctx, func(fl Flow) bool {
		for _, f := range filters {
			if f.match(fl) {
				return true
			}
		}
		return false
	})
}
