package all

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"kpbench.dev/kpbench/backends"
)

// Variants of the iptables backend that exist to prove the A/B gate (kpbench gate): a
// second name for the very same backend, so that A = B can run in one run, and the same
// backend made slower by a known share, so that a regression of known size can be
// injected.
const (
	// variantSame is iptables@same: the iptables backend under another name.
	variantSame = "same"
	// variantSlowPrefix starts iptables@slow-N: every sync waits N% of its own wall time
	// more (1-1000) before it returns, counted in its apply time.
	variantSlowPrefix = "slow-"
)

// parseSlow returns the slowdown of a slow-N variant as a fraction (0.25), ok false for
// another variant.
func parseSlow(v string) (float64, bool, error) {
	n, ok := strings.CutPrefix(v, variantSlowPrefix)
	if !ok {
		return 0, false, nil
	}
	p, err := strconv.Atoi(n)
	if err != nil || p < 1 || p > 1000 {
		return 0, true, fmt.Errorf("%s%s: want a slowdown in percent, 1-1000 (slow-25)", variantSlowPrefix, n)
	}
	return float64(p) / 100, true, nil
}

// slowed is a backend whose syncs take a share longer: it waits after the inner sync.
type slowed struct {
	backends.Backend
	name     string
	slowdown float64
}

// Name is the variant's reference (iptables@slow-25).
func (s *slowed) Name() string { return s.name }

// Unwrap returns the backend it slows, whose optional interfaces callers look up.
func (s *slowed) Unwrap() backends.Backend { return s.Backend }

// Sync runs the inner sync and then waits slowdown times its wall time (less if ctx ends).
func (s *slowed) Sync(ctx context.Context, desired *backends.State) (backends.SyncResult, error) {
	start := time.Now()
	res, err := s.Backend.Sync(ctx, desired)
	extra := time.Duration(float64(time.Since(start)) * s.slowdown)
	t := time.NewTimer(extra)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	res.Apply += extra
	return res, err
}
