//go:build linux

package perrule

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTimingLogSince: the rules of every sync after a mark are returned, a sync that added
// nothing does not hide the ones before it, and syncs older than the kept ones are said
// to be missing rather than silently left out.
func TestTimingLogSince(t *testing.T) {
	var l timingLog
	l.begin() // 1: the Service's sync
	l.add(RuleTiming{Chain: "KUBE-SERVICES", TableRules: 10})
	l.add(RuleTiming{Chain: "KUBE-SVC-X", TableRules: 11})
	mark := l.syncs
	l.begin() // 2: its EndpointSlice
	l.add(RuleTiming{Chain: "KUBE-SEP-Y", TableRules: 12})
	l.begin() // 3: a sync that changed nothing

	got, complete := l.since(mark)
	assert.True(t, complete)
	assert.Equal(t, []RuleTiming{{Chain: "KUBE-SEP-Y", TableRules: 12, Sync: 2}}, got)
	got, _ = l.since(0)
	assert.Len(t, got, 3)
	got, _ = l.since(l.syncs - 1)
	assert.Empty(t, got, "the last sync added no rule")

	for range keptSyncs {
		l.begin()
		l.add(RuleTiming{Chain: "KUBE-SERVICES"})
	}
	_, complete = l.since(mark)
	assert.False(t, complete, "the syncs just after the mark were forgotten")
	got, complete = l.since(l.syncs - keptSyncs)
	assert.True(t, complete)
	assert.Len(t, got, keptSyncs)
	assert.Len(t, l.timings, keptSyncs, "only the latest syncs' timings are kept")
}
