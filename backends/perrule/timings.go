//go:build linux

package perrule

import "slices"

// keptSyncs is how many of the latest syncs' rule timings a Backend keeps for
// RuleTimingsSince: enough for the few syncs one change can take (a Service and its
// EndpointSlice, and syncs that change nothing), few enough that a long run on this
// backend does not keep every rule it ever added.
const keptSyncs = 16

// timingLog numbers syncs and keeps the rule timings of the latest keptSyncs of them.
// Not safe for concurrent use: the Backend holds its lock.
type timingLog struct {
	syncs   uint64       // syncs begun so far; the current one's number
	timings []RuleTiming // of syncs syncs-keptSyncs+1 .. syncs, in order
}

// begin starts sync number syncs+1 and forgets the timings of syncs older than the
// latest keptSyncs.
func (l *timingLog) begin() {
	l.syncs++
	i := 0
	for i < len(l.timings) && l.timings[i].Sync+keptSyncs <= l.syncs {
		i++
	}
	l.timings = slices.Delete(l.timings, 0, i)
}

// add records a rule added by the current sync.
func (l *timingLog) add(t RuleTiming) {
	t.Sync = l.syncs
	l.timings = append(l.timings, t)
}

// since returns the timings of the syncs after mark, in order; complete is false when
// some of those syncs are older than the latest keptSyncs and their timings are gone.
func (l *timingLog) since(mark uint64) (out []RuleTiming, complete bool) {
	for _, t := range l.timings {
		if t.Sync > mark {
			out = append(out, t)
		}
	}
	return out, mark+keptSyncs >= l.syncs
}
