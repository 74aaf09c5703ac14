//go:build linux

package ipvs

import (
	"fmt"
	"maps"
	"net/netip"
)

// MaxWeight is the largest real-server weight SetWeights accepts (IPVS takes any
// non-negative int32; ipvsadm documents 0-65535).
const MaxWeight = 65535

// ValidateWeights checks experiment weights: IPv4 endpoint addresses, weights 0..MaxWeight.
func ValidateWeights(w map[netip.Addr]int) error {
	for ip, v := range w {
		if !ip.Is4() {
			return fmt.Errorf("weight for %s: only IPv4 endpoints have real servers", ip)
		}
		if v < 0 || v > MaxWeight {
			return fmt.Errorf("weight %d for %s: want 0..%d", v, ip, MaxWeight)
		}
	}
	return nil
}

// ApplyWeights overrides the weight of real servers that take new connections (weight 1)
// and whose address is in w: they get w[address] instead. Terminating real servers (weight
// 0) keep 0. A kpbench extension for experiments (see Backend.SetWeights): kube-proxy gives
// every real server weight 1.
func (m *Model) ApplyWeights(w map[netip.Addr]int) {
	if len(w) == 0 {
		return
	}
	for _, vs := range m.Services {
		for d, cur := range vs.Dests {
			if v, ok := w[d.Addr()]; ok && cur == 1 {
				vs.Dests[d] = v
			}
		}
	}
}

// SetScheduler switches the scheduler of every virtual server, as restarting kube-proxy
// with another ipvs.scheduler does: the next Sync is full and updates each virtual server in
// place (established connections stay). Options.Scheduler is the proxy configuration's
// choice; this lets one experiment measure several schedulers on one lab.
//
// Equivalent to: `ipvsadm -E -t $vip:$port -s $scheduler` for every virtual server.
func (b *Backend) SetScheduler(name string) error {
	if !ValidScheduler(name) {
		return fmt.Errorf("ipvs backend for %s: unknown scheduler %q", b.opts.NodeName, name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opts.Scheduler = name
	b.synced.ForceFullSync()
	return nil
}

// Scheduler returns the scheduler the next Sync programs.
func (b *Backend) Scheduler() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opts.Scheduler
}

// SetWeights sets experiment-only real-server weights by endpoint address (nil or empty:
// kube-proxy's weight 1 for everyone again); the next Sync is full and applies them with
// Model.ApplyWeights. This is a kpbench extension, not a kube-proxy feature: kube-proxy
// gives every serving endpoint weight 1 (terminating ones 0), so wrr and wlc behave like rr
// and lc there. Setting weights lets a measurement check that the weighted schedulers follow
// them (expected share = weight / sum of weights).
//
// Equivalent to: `ipvsadm -e -t $vip:$port -r $ip:$port -m -w $weight` per real server.
func (b *Backend) SetWeights(w map[netip.Addr]int) error {
	if err := ValidateWeights(w); err != nil {
		return fmt.Errorf("ipvs backend for %s: %w", b.opts.NodeName, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.weights = maps.Clone(w)
	b.synced.ForceFullSync()
	return nil
}
