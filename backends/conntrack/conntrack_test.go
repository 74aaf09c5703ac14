//go:build linux

package conntrack

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
)

// fakeTable is a conntrack table in memory.
type fakeTable struct{ flows []Flow }

func (f *fakeTable) DeleteMatching(_ context.Context, match func(Flow) bool) (int, error) {
	var keep []Flow
	n := 0
	for _, fl := range f.flows {
		if match(fl) {
			n++
			continue
		}
		keep = append(keep, fl)
	}
	f.flows = keep
	return n, nil
}

func udpState(eps ...string) *backends.State {
	sp := &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: "ns", Name: "dns", Port: "dns", Protocol: backends.UDP},
		ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 53, NodePort: 30053,
	}
	for _, e := range eps {
		sp.Endpoints = append(sp.Endpoints, backends.Endpoint{IP: netip.MustParseAddr(e), Port: 5353, Ready: true, Serving: true})
	}
	return &backends.State{NodeIPs: []netip.Addr{netip.MustParseAddr("172.18.0.10")}, Services: []*backends.ServicePort{sp}}
}

func flow(dst, replySrc string) Flow {
	return Flow{Proto: ProtoUDP, OrigSrc: netip.MustParseAddrPort("10.244.0.9:4000"),
		OrigDst: netip.MustParseAddrPort(dst), ReplySrc: netip.MustParseAddrPort(replySrc)}
}

// TestClearDeletesOnlyStaleEntries: StaleUDP between two states, cleared from a table,
// deletes what the change made stale and nothing else.
func TestClearDeletesOnlyStaleEntries(t *testing.T) {
	tests := []struct {
		name       string
		before     *backends.State
		after      *backends.State
		flows      []Flow
		wantLeft   []Flow
		wantDelete int
	}{
		{
			name:   "removed endpoint: its entries go, on the ClusterIP and the node port",
			before: udpState("10.244.0.2", "10.244.1.2"), after: udpState("10.244.1.2"),
			flows: []Flow{
				flow("10.96.0.10:53", "10.244.0.2:5353"),
				flow("172.18.0.10:30053", "10.244.0.2:5353"),
				flow("10.96.0.10:53", "10.244.1.2:5353"),
			},
			wantLeft:   []Flow{flow("10.96.0.10:53", "10.244.1.2:5353")},
			wantDelete: 2,
		},
		{
			name:   "first endpoint: entries made for the REJECT go",
			before: udpState(), after: udpState("10.244.1.2"),
			flows:      []Flow{flow("10.96.0.10:53", "10.96.0.10:53")},
			wantDelete: 1,
		},
		{
			name:   "nothing changed: nothing deleted",
			before: udpState("10.244.1.2"), after: udpState("10.244.1.2"),
			flows:    []Flow{flow("10.96.0.10:53", "10.244.1.2:5353")},
			wantLeft: []Flow{flow("10.96.0.10:53", "10.244.1.2:5353")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := &fakeTable{flows: tt.flows}
			n, err := Clear(context.Background(), table, StaleUDP(backends.Snapshot(tt.before), tt.after))
			require.NoError(t, err)
			assert.Equal(t, tt.wantDelete, n)
			assert.Equal(t, tt.wantLeft, table.flows)
		})
	}
}
