//go:build linux

package check

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"kpbench.dev/kpbench/lab/echo"
	"kpbench.dev/kpbench/lab/probe"
	"kpbench.dev/kpbench/reports/stats"
)

// lateEndpoints answers like a proxy that programmed one endpoint first and the others
// after `late` requests: round robin over pods[:1], then over every pod.
type lateEndpoints struct {
	pods []string
	late int
	n    int
}

func (l *lateEndpoints) Request(context.Context, probe.Destination, probe.Options) probe.Result {
	pods := l.pods
	if l.n < l.late {
		pods = pods[:1]
	}
	pod := pods[l.n%len(pods)]
	l.n++
	return probe.Result{Class: probe.OK, Answer: echo.Answer{Pod: pod}}
}

func TestConvergeSkipsTheProxysLateEndpoints(t *testing.T) {
	tests := []struct {
		name        string
		late        int
		wantSent    int
		wantWarmup  bool
		wantAllSeen bool
	}{
		{"every endpoint from the start", 0, 3, false, true},
		{"two endpoints after 20 probes", 20, 23, true, true},
		{"never within the bound", 1000, convergeProbesPerEndpoint * 3, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &lateEndpoints{pods: []string{"a", "b", "c"}, late: tt.late}
			expected := map[string]bool{"a": true, "b": true, "c": true}
			target := probe.Destination{Addr: netip.MustParseAddrPort("10.96.0.1:80"), Protocol: "TCP"}
			evidence := converge(context.Background(), r, target, expected, probe.Options{})
			assert.Equal(t, tt.wantSent, r.n, "probes sent")
			assert.Equal(t, tt.wantWarmup, evidence != "", evidence)
			if !tt.wantAllSeen {
				assert.Contains(t, evidence, "1/3 endpoints answering")
			}
		})
	}
}

// TestLateEndpointsSkewTheCountWithoutConverge shows the failure converge prevents: 60
// probes counted from the first answer, 24 of them before the last two endpoints were
// programmed, fail the uniformity test; the 60 after converge pass it.
func TestLateEndpointsSkewTheCountWithoutConverge(t *testing.T) {
	target := probe.Destination{Addr: netip.MustParseAddrPort("10.96.0.1:80"), Protocol: "TCP"}
	counts := func(r *lateEndpoints) []int {
		tally := ProbeN(context.Background(), r, target, 60, probe.Options{}, 0)
		return []int{tally.Pods["a"], tally.Pods["b"], tally.Pods["c"]}
	}
	pValue := func(obs []int) float64 {
		_, _, p, err := stats.ChiSquareGOF(obs, stats.Uniform(len(obs)))
		assert.NoError(t, err)
		return p
	}
	skewed := counts(&lateEndpoints{pods: []string{"a", "b", "c"}, late: 24})
	assert.Less(t, pValue(skewed), MinPValue, "counted from the start: %v", skewed)

	r := &lateEndpoints{pods: []string{"a", "b", "c"}, late: 24}
	converge(context.Background(), r, target, map[string]bool{"a": true, "b": true, "c": true}, probe.Options{})
	settled := counts(r)
	assert.Greater(t, pValue(settled), MinPValue, "counted after converge: %v", settled)
}
