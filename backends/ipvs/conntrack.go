package ipvs

import (
	"net/netip"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/conntrack"
)

// StaleFlow selects UDP conntrack entries to delete after a sync, as kube-proxy does: entries
// whose original destination is Dst and, when ReplySrc is valid, whose replies come from
// ReplySrc (the real server that went away). Without this, a UDP client on a fixed source
// port keeps sending to a dead pod.
type StaleFlow struct {
	// Dst is the virtual server address:port the client used.
	Dst netip.AddrPort
	// ReplySrc is the removed real server (invalid: every entry to Dst).
	ReplySrc netip.AddrPort
}

// StaleUDPFlows derives the conntrack entries to delete from a plan and the models it was
// computed from:
//
//   - a real server removed from a UDP virtual server: its entries to that virtual server;
//   - a UDP virtual server removed: all its entries;
//   - a UDP virtual server that gets real servers while it had none (or did not exist): all
//     its entries, cached while traffic to it was refused.
//
// Real servers whose weight drops to 0 (terminating) keep their entries.
func StaleUDPFlows(p *Plan, desired, current *Model, only map[ServiceKey]bool) []StaleFlow {
	var out []StaleFlow
	dst := func(k ServiceKey) netip.AddrPort { return netip.AddrPortFrom(k.Addr, k.Port) }
	for _, d := range p.DelDests {
		if d.Service.Protocol == backends.UDP {
			out = append(out, StaleFlow{Dst: dst(d.Service), ReplySrc: d.Dest})
		}
	}
	for _, k := range p.DelServices {
		if k.Protocol == backends.UDP {
			out = append(out, StaleFlow{Dst: dst(k)})
		}
	}
	for _, k := range desired.SortedKeys() {
		want := desired.Services[k]
		if k.Protocol != backends.UDP || len(want.Dests) == 0 {
			continue
		}
		have, ok := current.Services[k]
		if !ok || ((only == nil || only[k]) && len(have.Dests) == 0) {
			out = append(out, StaleFlow{Dst: dst(k)})
		}
	}
	return out
}

// Filter is the flow as the shared conntrack cleanup selects it (backends/conntrack): UDP
// entries to Dst, answered by ReplySrc when it is valid.
func (f StaleFlow) Filter() conntrack.Filter {
	return conntrack.Filter{Dsts: []netip.AddrPort{f.Dst}, ReplySrc: f.ReplySrc}
}
