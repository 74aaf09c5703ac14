//go:build linux

package iptables

import (
	"context"
	"errors"
	"fmt"
)

// CheckState reports whether what the last successful sync wrote is still in the kernel,
// the way kube-proxy's canary monitor does (pkg/util/iptables Monitor): the chain
// KUBE-PROXY-CANARY must exist in the mangle, nat and filter tables (a firewall reload or
// `iptables -t nat -F; iptables -t nat -X` removes it), and the nat jumps into
// kube-proxy's chains must be in place (`iptables -t nat -F` alone removes those but leaves
// the chains). It returns nil before the first sync. When something is missing it returns
// an error naming it and makes the next Sync full (the agent calls it every CheckPeriod,
// see backends/agent.StateChecker).
//
// Equivalent to: `iptables -w -t $table -S KUBE-PROXY-CANARY` for mangle, nat and filter,
// then `iptables -w -t nat -C $chain ... -j $target` for each nat jump.
func (b *Backend) CheckState(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.synced.Check(ctx, func(ctx context.Context) error {
		err := b.checkState(ctx)
		if err != nil {
			b.installed = nil // list the kernel's chains again: they may be gone
		}
		return err
	})
}

func (b *Backend) checkState(ctx context.Context) error {
	for _, table := range []string{"mangle", "nat", "filter"} {
		_, err := b.run(ctx, b.ipt, nil, "-w", "-t", table, "-S", ChainCanary)
		if err == nil {
			continue
		}
		if exitCode(err) == 1 {
			return fmt.Errorf("chain %s is gone from table %s", ChainCanary, table)
		}
		return fmt.Errorf("check %s in table %s: %w", ChainCanary, table, err)
	}
	var errs []error
	for _, j := range Jumps() {
		if j.Table != "nat" {
			continue
		}
		args := append([]string{"-w", "-t", j.Table, "-C", j.From}, j.Args()...)
		_, err := b.run(ctx, b.ipt, nil, args...)
		switch {
		case err == nil:
		case exitCode(err) == 1 || exitCode(err) == 2:
			// 1: no such rule; 2: its target chain is gone.
			errs = append(errs, fmt.Errorf("jump %s -> %s is gone from table %s", j.From, j.To, j.Table))
		default:
			errs = append(errs, fmt.Errorf("check jump %s -> %s in table %s: %w", j.From, j.To, j.Table, err))
		}
	}
	return errors.Join(errs...)
}
