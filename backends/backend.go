package backends

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Backend programs one node's kernel for one proxy mode.
type Backend interface {
	// Name is the backend's name as users select it ("iptables", "nftables", ...).
	Name() string
	// Sync makes the kernel match desired. It receives the whole desired state and decides
	// itself what to rewrite (full or partial). After an error the next Sync is full.
	Sync(ctx context.Context, desired *State) (SyncResult, error)
	// Cleanup removes everything this backend installed on the node.
	Cleanup(ctx context.Context) error
}

// ErrMachineLimit marks a sync failure that no retry can fix on this machine: the desired
// state needs more of a resource (open files, say) than the process may have. Waits for
// the sync give up at once, with the error, instead of running to their timeout.
var ErrMachineLimit = errors.New("beyond this machine's limits")

// SyncResult describes one sync: what was written and what it cost.
type SyncResult struct {
	// Full is true when the whole ruleset was rewritten, false for a partial sync.
	Full bool
	// FullReason says why a full sync was full when the backend decided it itself (the
	// kernel lost its rules, say); empty for the first sync, a forced one, one after a
	// failure, and partial syncs.
	FullReason string
	// Generate is the wall time spent in our code building the rules; Apply the wall time
	// of the kernel tool or netlink calls that wrote them.
	Generate, Apply time.Duration
	// ApplyCPU is the CPU time (user+system) of exec'd tools, when known.
	ApplyCPU time.Duration
	// Rules is the number of rules (or objects) written; Bytes the size of the input text.
	Rules, Bytes int
	// ChangedServices is the number of service ports whose rules were rewritten.
	ChangedServices int
	// Confirm is the part of the call spent after the rules were in place, confirming
	// that they were (upstream kube-proxy's quiet period): the agent dates the end of
	// the sync that much earlier, so it does not count as programming latency.
	Confirm time.Duration
}

func sortEndpoints(eps []Endpoint) {
	slices.SortFunc(eps, func(a, b Endpoint) int {
		if c := a.IP.Compare(b.IP); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
}

// SortEndpoints sorts endpoints by IP, then port: the order of endpoint rules.
func SortEndpoints(eps []Endpoint) { sortEndpoints(eps) }
