package all

import (
	"context"
	"hash/fnv"
	"net/netip"
	"slices"

	"kpbench.dev/kpbench/backends"
)

// Variants of the iptables backend that misbehave on purpose, so that the checks that
// must catch a broken proxy can be shown to: a test runs a check against the variant
// and expects it to fail, and the same check against the plain backend and expects it to
// pass.
const (
	// variantSkew is iptables@skew: every endpoint rule of a Service but the last
	// matches with probability 1/n instead of 1/(n-i), the classic bug of early proxies
	// (shares 1/3, 2/9, 4/9 for 3 endpoints). The distribution checks must catch it.
	variantSkew = "skew"
	// variantBlackholePrefix starts iptables@blackhole-N: N% of the Services (1-100,
	// chosen by a hash of their namespace and name, so the same ones at every sync) have
	// their traffic DNATed to addresses nobody holds, where it is dropped: connections
	// time out. The churn's bounds must catch it.
	variantBlackholePrefix = "blackhole-"
)

// blackholeNet is where a blackholed Service's endpoints point: TEST-NET-1 (RFC 5737),
// which no lab host holds. A node routes it to its default gateway, the lab's fabric,
// which does not forward: the packets die inside the lab.
var blackholeNet = netip.MustParsePrefix("192.0.2.0/24")

// parseBlackhole returns the share of Services a blackhole-N variant drops (0.1), ok false
// for another variant.
func parseBlackhole(v string) (float64, bool, error) {
	return parsePercent(v, variantBlackholePrefix, 100, "a share of Services", 10)
}

// blackholed is a backend that drops the traffic of a share of the Services: it
// programs them with their endpoints moved into blackholeNet.
type blackholed struct {
	wrapped
	share float64
}

// Sync programs desired with the chosen Services' endpoints moved (desired itself is not
// changed).
func (b *blackholed) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	return b.Backend.Sync(ctx, b.rewrite(desired))
}

// rewrite returns a copy of desired in which every chosen Service port's endpoints are
// distinct addresses of blackholeNet (same ports, conditions and nodes).
func (b *blackholed) rewrite(desired *backends.State) *backends.State {
	if desired == nil {
		return nil
	}
	out := *desired
	out.Services = slices.Clone(desired.Services)
	for i, sp := range out.Services {
		if !b.chosen(sp.Name) {
			continue
		}
		c := *sp
		c.Endpoints = slices.Clone(sp.Endpoints)
		size := 1<<(32-blackholeNet.Bits()) - 2 // usable host addresses
		for k := range c.Endpoints {
			a := blackholeNet.Addr()
			for range 1 + k%size {
				a = a.Next()
			}
			c.Endpoints[k].IP = a
			c.Endpoints[k].Port += int32(k / size) // distinct IP:port beyond the block's size
		}
		slices.SortFunc(c.Endpoints, func(x, y backends.Endpoint) int { return x.AddrPort().Compare(y.AddrPort()) })
		out.Services[i] = &c
	}
	return &out
}

// chosen reports whether a Service falls in the blackholed share (all its ports do).
func (b *blackholed) chosen(n backends.ServicePortName) bool {
	h := fnv.New32a()
	h.Write([]byte(n.Namespace + "/" + n.Name))
	return float64(h.Sum32()%100) < b.share*100
}
