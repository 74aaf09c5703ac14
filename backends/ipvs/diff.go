package ipvs

import (
	"net/netip"
	"slices"

	"kpbench.dev/kpbench/backends"
)

// DestChange is one real-server operation on a virtual server.
type DestChange struct {
	// Service is the virtual server the real server belongs to.
	Service ServiceKey
	// Dest is the real server's address and port.
	Dest netip.AddrPort
	// Weight is the weight to set (unused for deletions).
	Weight int
}

// Plan is what Diff found: the kernel operations that turn the current model into the
// desired one, each list sorted. Apply order: add addresses, add and update virtual servers,
// add, update and delete real servers, delete virtual servers, delete addresses.
type Plan struct {
	// AddServices and UpdateServices hold desired virtual servers that are missing or whose
	// scheduler, flags or timeout differ; DelServices the keys of stale ones.
	AddServices, UpdateServices []*VirtualServer
	DelServices                 []ServiceKey
	// AddDests, UpdateDests (weight changed) and DelDests are real-server operations on
	// virtual servers that are kept or added. Real servers of deleted virtual servers go
	// with them.
	AddDests, UpdateDests, DelDests []DestChange
	// AddAddrs and DelAddrs are kube-ipvs0 address changes.
	AddAddrs, DelAddrs []netip.Addr
	// Changed are the service ports (owners) with at least one operation.
	Changed map[backends.ServicePortName]bool
}

// Ops returns the number of kernel operations in the plan.
func (p *Plan) Ops() int {
	return len(p.AddServices) + len(p.UpdateServices) + len(p.DelServices) + len(p.AddDests) +
		len(p.UpdateDests) + len(p.DelDests) + len(p.AddAddrs) + len(p.DelAddrs)
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return p.Ops() == 0 }

// Diff compares desired with current (as read from the kernel) and returns the operations
// that make the kernel match. When only is not nil, the real servers of virtual servers that
// exist in both models are compared only for keys in only (a partial sync reads back the
// real servers of changed virtual servers only); virtual servers and addresses are always
// compared in full.
func Diff(desired, current *Model, only map[ServiceKey]bool) *Plan {
	p := &Plan{Changed: map[backends.ServicePortName]bool{}}
	for _, k := range desired.SortedKeys() {
		want := desired.Services[k]
		have, ok := current.Services[k]
		if !ok {
			p.AddServices = append(p.AddServices, want)
			p.Changed[want.Owner] = true
			for _, d := range sortedDests(want.Dests) {
				p.AddDests = append(p.AddDests, DestChange{Service: k, Dest: d, Weight: want.Dests[d]})
			}
			continue
		}
		if !want.sameConfig(have) {
			p.UpdateServices = append(p.UpdateServices, want)
			p.Changed[want.Owner] = true
		}
		if only != nil && !only[k] {
			continue
		}
		for _, d := range sortedDests(want.Dests) {
			w, ok := have.Dests[d]
			switch {
			case !ok:
				p.AddDests = append(p.AddDests, DestChange{Service: k, Dest: d, Weight: want.Dests[d]})
			case w != want.Dests[d]:
				p.UpdateDests = append(p.UpdateDests, DestChange{Service: k, Dest: d, Weight: want.Dests[d]})
			default:
				continue
			}
			p.Changed[want.Owner] = true
		}
		for _, d := range sortedDests(have.Dests) {
			if _, ok := want.Dests[d]; !ok {
				p.DelDests = append(p.DelDests, DestChange{Service: k, Dest: d})
				p.Changed[want.Owner] = true
			}
		}
	}
	for _, k := range current.SortedKeys() {
		if _, ok := desired.Services[k]; !ok {
			p.DelServices = append(p.DelServices, k)
		}
	}
	for _, a := range sortedAddrs(desired.Addrs) {
		if !current.Addrs[a] {
			p.AddAddrs = append(p.AddAddrs, a)
		}
	}
	for _, a := range sortedAddrs(current.Addrs) {
		if !desired.Addrs[a] {
			p.DelAddrs = append(p.DelAddrs, a)
		}
	}
	return p
}

func sortedDests(m map[netip.AddrPort]int) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(m))
	for d := range m {
		out = append(out, d)
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

func sortedAddrs(m map[netip.Addr]bool) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a, ok := range m {
		if ok {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
