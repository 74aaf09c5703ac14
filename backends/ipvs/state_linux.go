//go:build linux

package ipvs

import (
	"context"
	"fmt"
)

// CheckState reports whether what the last successful sync wrote is still in the kernel:
// kube-ipvs0 exists and every cluster-IP virtual server of the last synced state is in the
// IPVS table (`ipvsadm -C` or `ipvsadm -D` behind the agent's back removes them). Real
// servers, node-port and external virtual servers are left to the next sync (a partial
// sync reads every virtual server from the kernel anyway). It returns nil before the
// first sync. When something is missing it returns an error naming it and makes the next
// Sync full (the agent calls it every CheckPeriod, see backends/agent.StateChecker).
//
// Equivalent to: `ip link show kube-ipvs0; ipvsadm -Ln` (services only, one dump).
func (b *Backend) CheckState(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.synced.Check(ctx, func(context.Context) error { return b.checkState() })
}

func (b *Backend) checkState() error {
	if _, err := b.nl.LinkByName(DummyDevice); err != nil {
		return fmt.Errorf("%s is gone: %w", DummyDevice, err)
	}
	svcs, err := b.ipvs.GetServices()
	if err != nil {
		return fmt.Errorf("list ipvs services: %w", err)
	}
	have := make(map[ServiceKey]bool, len(svcs))
	for _, s := range svcs {
		if k, ok := keyOf(s); ok {
			have[k] = true
		}
	}
	missing, total := 0, 0
	var first ServiceKey
	for _, sp := range b.synced.Last() {
		if !sp.ClusterIP.Is4() {
			continue
		}
		total++
		k := ServiceKey{Addr: sp.ClusterIP, Protocol: sp.Protocol(), Port: uint16(sp.Port)}
		if !have[k] {
			if missing == 0 || k.Compare(first) < 0 {
				first = k
			}
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d cluster-IP virtual servers are gone from the IPVS table (first: %s)", missing, total, first)
	}
	return nil
}
