//go:build linux

package measure

import (
	"context"
	"fmt"
	"time"

	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/backends/perrule"
	"kpbench.dev/kpbench/cluster"
)

// RuleLog is what a backend that adds rules one iptables call at a time records of them
// (the iptables-perrule backend; all.RuleTimer).
type RuleLog interface {
	// Syncs returns how many syncs the backend has begun: a mark.
	Syncs() uint64
	// RuleTimingsSince returns every rule added by the syncs after mark; complete is
	// false when the backend no longer holds some of them.
	RuleTimingsSince(mark uint64) (timings []perrule.RuleTiming, complete bool)
}

// AddedService is what adding one Service cost a per-rule backend.
type AddedService struct {
	// Rules are the rules added by every sync from the write to the end of the wait, in
	// order; Rules[0].TableRules is the table's size before the first.
	Rules []perrule.RuleTiming
	// Syncs are the proxy's syncs in that time (none when it keeps no records).
	Syncs []agent.SyncRecord
}

// Wall is the Service's cost: its syncs' wall time (rules, chain creation, jump checks),
// or the rules' own time when the proxy recorded no sync.
func (a AddedService) Wall() time.Duration {
	var total time.Duration
	if len(a.Syncs) > 0 {
		for _, r := range a.Syncs {
			total += r.Duration()
		}
		return total
	}
	for _, t := range a.Rules {
		total += t.Duration
	}
	return total
}

// AddService times one Service's addition on a per-rule backend: add writes the Service
// and its endpoints and waits until the proxy has programmed them; the rules are those of
// every sync since add was called. The sync that added the Service need not be the last
// one: the Service and its EndpointSlice may reach the proxy in two syncs, and a sync
// that changes nothing may follow; reading the last sync alone lost the Service's rules.
func AddService(ctx context.Context, px cluster.Proxy, log RuleLog, add func(ctx context.Context) error) (AddedService, error) {
	mark := log.Syncs()
	before := len(px.Records())
	if err := add(ctx); err != nil {
		return AddedService{}, err
	}
	var a AddedService
	var complete bool
	a.Rules, complete = log.RuleTimingsSince(mark)
	if recs := px.Records(); len(recs) > before {
		a.Syncs = recs[before:]
	}
	syncs := log.Syncs() - mark
	switch {
	case !complete:
		return a, fmt.Errorf("adding a service took %d syncs on %s, more than the backend keeps the rules of", syncs, px.Node())
	case len(a.Rules) == 0:
		return a, fmt.Errorf("adding a service added no rule on %s (%d syncs since the write)", px.Node(), syncs)
	}
	return a, nil
}
