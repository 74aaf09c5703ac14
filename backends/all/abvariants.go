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
	return parsePercent(v, variantSlowPrefix, 1000, "a slowdown", 25)
}

// parsePercent reads the N of a variant prefixN (1-max percent) as a fraction, ok false
// when v does not start with prefix; what names N in the error, example is a good N.
func parsePercent(v, prefix string, max int, what string, example int) (float64, bool, error) {
	n, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return 0, false, nil
	}
	p, err := strconv.Atoi(n)
	if err != nil || p < 1 || p > max {
		return 0, true, fmt.Errorf("%s%s: want %s in percent, 1-%d (%s%d)", prefix, n, what, max, prefix, example)
	}
	return float64(p) / 100, true, nil
}

// wrapped is a backend under a variant's reference (iptables@slow-25); callers look its
// optional interfaces up through Unwrap.
type wrapped struct {
	backends.Backend
	name string
}

// Name is the variant's reference.
func (w wrapped) Name() string { return w.name }

// Unwrap returns the backend it wraps.
func (w wrapped) Unwrap() backends.Backend { return w.Backend }

// slowed is a backend whose syncs take a share longer: it waits after the inner sync.
type slowed struct {
	wrapped
	slowdown float64
}

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
