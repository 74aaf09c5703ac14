//go:build linux

package backendstest

import (
	"context"
	"net/netip"
	"sync"

	"kpbench.dev/kpbench/backends/conntrack"
)

// Conntrack is a node's conntrack table in memory (conntrack.Table): tests fill it with
// flows and see which ones a backend's cleanup deleted.
type Conntrack struct {
	mu    sync.Mutex
	flows []conntrack.Flow
}

// NewConntrack returns a table holding flows.
func NewConntrack(flows ...conntrack.Flow) *Conntrack { return &Conntrack{flows: flows} }

// UDPFlow is a UDP flow from a client to dst (a service address), answered by replySrc
// (the endpoint after DNAT).
func UDPFlow(client, dst, replySrc string) conntrack.Flow {
	return conntrack.Flow{
		Proto: conntrack.ProtoUDP, OrigSrc: netip.MustParseAddrPort(client),
		OrigDst: netip.MustParseAddrPort(dst), ReplySrc: netip.MustParseAddrPort(replySrc),
	}
}

// Add puts flows in the table.
func (c *Conntrack) Add(flows ...conntrack.Flow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flows = append(c.flows, flows...)
}

// Replace makes flows the table's whole content.
func (c *Conntrack) Replace(flows ...conntrack.Flow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flows = append([]conntrack.Flow(nil), flows...)
}

// Flows returns the flows left.
func (c *Conntrack) Flows() []conntrack.Flow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]conntrack.Flow(nil), c.flows...)
}

// DeleteMatching implements conntrack.Table.
func (c *Conntrack) DeleteMatching(_ context.Context, match func(conntrack.Flow) bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keep []conntrack.Flow
	n := 0
	for _, fl := range c.flows {
		if match(fl) {
			n++
			continue
		}
		keep = append(keep, fl)
	}
	c.flows = keep
	return n, nil
}
