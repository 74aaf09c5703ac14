//go:build linux

package nftables

import (
	"context"
	"fmt"

	gnft "github.com/google/nftables"

	"kpbench.dev/kpbench/internal/netns"
)

// CheckState reports whether what the last successful sync wrote is still in the kernel.
// kube-proxy's nftables mode has no canary (it relies on periodic full syncs); kpbench
// checks two things cheaply: `table ip kube-proxy` exists (`nft delete table` removes it)
// and its base chain nat-prerouting still holds its rules (`nft flush table` empties every
// chain but leaves the table). It returns nil before the first sync. When something is
// missing it returns an error naming it and makes the next Sync full (the agent calls it
// every CheckPeriod, see backends/agent.StateChecker).
//
// Equivalent to: `nft list tables ip; nft list chain ip kube-proxy nat-prerouting`.
func (b *Backend) CheckState(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.synced.Check(ctx, b.checkState)
}

func (b *Backend) checkState(ctx context.Context) error {
	ok, err := b.k.tableExists(ctx)
	if err != nil {
		return fmt.Errorf("check table ip %s: %w", Table, err)
	}
	if !ok {
		return fmt.Errorf("table ip %s is gone", Table)
	}
	n, err := b.baseChainRules(ctx, natPreroutingChain)
	if err != nil {
		return fmt.Errorf("check chain %s: %w", natPreroutingChain, err)
	}
	if n == 0 {
		return fmt.Errorf("chain %s of table ip %s is empty (flushed)", natPreroutingChain, Table)
	}
	return nil
}

// baseChainRules counts the rules of one chain of the table: over netlink inside the node's
// namespace (a dump of one chain, whatever the table's size), or through knftables for a
// kernel without namespace (the fake).
func (b *Backend) baseChainRules(ctx context.Context, chain string) (int, error) {
	nk, ok := b.k.(nsKernel)
	if !ok {
		rules, err := b.nft.ListRules(ctx, chain)
		return len(rules), err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := netns.Do(nk.tools.NSPath, func() error {
		conn, err := gnft.New()
		if err != nil {
			return err
		}
		rules, err := conn.GetRules(&gnft.Table{Name: Table, Family: gnft.TableFamilyIPv4}, &gnft.Chain{Name: chain})
		if err != nil {
			return err
		}
		n = len(rules)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("list rules: %w", err)
	}
	return n, nil
}
