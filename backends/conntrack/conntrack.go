//go:build linux

// Package conntrack deletes the UDP conntrack entries that a proxy change leaves stale, as
// kube-proxy does after every sync: when a UDP endpoint goes away, entries whose replies
// come from it (for every address of the service) are deleted, or clients on a fixed
// source port keep sending to a dead pod; when a UDP service gets its first endpoint, its
// entries are deleted, since they were made for the REJECT. Every backend shares it.
package conntrack

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ti-mo/conntrack"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/internal/netns"
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

// Namespace is the conntrack table of the network namespace at Path, over netlink.
type Namespace struct{ Path string }

// DeleteMatching dumps the table and deletes matching entries one by one, on a socket
// opened inside the namespace (internal/netns.Do; the socket stays there).
//
// Equivalent to: `conntrack -D -p udp --orig-dst $svcIP --orig-port-dst $port --reply-src $ep`.
func (c Namespace) DeleteMatching(ctx context.Context, match func(Flow) bool) (int, error) {
	deleted := 0
	err := netns.Do(c.Path, func() error {
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

// Cleaner keeps the last state a node programmed and, after each successful sync, deletes
// the UDP entries that the change made stale. Backends that do not do it themselves get it
// from the agent's side through WithUDPCleanup.
type Cleaner struct {
	table Table
	last  map[backends.ServicePortName]*backends.ServicePort
}

// NewCleaner returns a cleaner working on table.
func NewCleaner(table Table) *Cleaner { return &Cleaner{table: table} }

// AfterSync deletes the entries made stale by going from the last state to st, and
// remembers st. The first call only remembers (there is nothing older to compare with).
func (c *Cleaner) AfterSync(ctx context.Context, st *backends.State) (int, error) {
	var n int
	var err error
	if c.last != nil {
		n, err = Clear(ctx, c.table, StaleUDP(c.last, st))
	}
	c.last = backends.Snapshot(st)
	return n, err
}

// udpCleaning is a backend followed by a Cleaner.
type udpCleaning struct {
	backends.Backend
	cleaner *Cleaner
}

// WithUDPCleanup wraps b so that every successful sync is followed by the UDP conntrack
// cleanup of the node's namespace at nsPath.
func WithUDPCleanup(b backends.Backend, nsPath string) backends.Backend {
	return &udpCleaning{Backend: b, cleaner: NewCleaner(Namespace{Path: nsPath})}
}

// Sync syncs the backend, then cleans up; a cleanup failure fails the sync (the agent
// retries, and the backend's next sync is cheap when nothing changed).
func (u *udpCleaning) Sync(ctx context.Context, st *backends.State) (backends.SyncResult, error) {
	res, err := u.Backend.Sync(ctx, st)
	if err != nil {
		return res, err
	}
	if _, err := u.cleaner.AfterSync(ctx, st); err != nil {
		return res, fmt.Errorf("sync %s: conntrack cleanup: %w", u.Backend.Name(), err)
	}
	return res, nil
}

// Unwrap returns the wrapped backend: the agent looks up optional interfaces (its state
// check) through it.
func (u *udpCleaning) Unwrap() backends.Backend { return u.Backend }

// ForceFullSync passes through to the wrapped backend.
func (u *udpCleaning) ForceFullSync() {
	if fs, ok := u.Backend.(interface{ ForceFullSync() }); ok {
		fs.ForceFullSync()
	}
}
