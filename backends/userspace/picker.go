package userspace

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// picker chooses the endpoint of each new connection or UDP session of one service port:
// round-robin over the endpoints, and with ClientIP affinity the endpoint a client used last,
// until it has been idle for the affinity timeout. It mirrors kube-proxy's userspace
// LoadBalancerRR (pkg/proxy/userspace/roundrobin.go, Kubernetes <= 1.25). It is safe for
// concurrent use.
type picker struct {
	now func() time.Time

	mu        sync.Mutex
	endpoints []netip.AddrPort
	next      int
	affinity  bool
	ttl       time.Duration
	clients   map[netip.Addr]*stick
}

// stick is one client's affinity: the endpoint it is pinned to and when it last used it.
type stick struct {
	endpoint netip.AddrPort
	last     time.Time
}

// newPicker returns a picker with no endpoints; now is the clock (time.Now in production).
func newPicker(now func() time.Time) *picker {
	return &picker{now: now, clients: map[netip.Addr]*stick{}}
}

// update replaces the endpoints and the affinity settings. When the endpoint list changes the
// round-robin restarts at the first endpoint (as kube-proxy's did), and affinity entries of
// endpoints that are gone are dropped; entries of endpoints that remain are kept. Turning
// affinity off forgets every entry.
func (p *picker) update(endpoints []netip.AddrPort, affinity bool, ttl time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.endpoints, endpoints) {
		p.endpoints = slices.Clone(endpoints)
		p.next = 0
	}
	p.affinity, p.ttl = affinity, ttl
	for ip, s := range p.clients {
		if !affinity || !slices.Contains(p.endpoints, s.endpoint) {
			delete(p.clients, ip)
		}
	}
}

// pick returns the endpoint for a connection from client. With affinity, a client whose
// entry has not expired gets its endpoint again, unless reset is true (the previous choice
// could not be reached: the entry is replaced by the next round-robin endpoint). ok is false
// when there are no endpoints.
func (p *picker) pick(client netip.Addr, reset bool) (ep netip.AddrPort, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.endpoints) == 0 {
		return netip.AddrPort{}, false
	}
	now := p.now()
	if p.affinity {
		if s, found := p.clients[client]; found && !reset && now.Sub(s.last) < p.ttl {
			s.last = now
			return s.endpoint, true
		}
	}
	ep = p.endpoints[p.next%len(p.endpoints)]
	p.next = (p.next + 1) % len(p.endpoints)
	if p.affinity {
		p.clients[client] = &stick{endpoint: ep, last: now}
	}
	return ep, true
}

// touch records traffic of client on an established session, so that affinity expires only
// after ttl without traffic.
func (p *picker) touch(client netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.clients[client]; ok {
		s.last = p.now()
	}
}

// expire drops affinity entries idle for longer than the timeout and returns how many are
// left.
func (p *picker) expire() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for ip, s := range p.clients {
		if now.Sub(s.last) >= p.ttl {
			delete(p.clients, ip)
		}
	}
	return len(p.clients)
}
