package all

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
)

func TestABVariantsValidate(t *testing.T) {
	for ref, ok := range map[string]bool{
		"iptables@same": true, "iptables@slow-25": true, "iptables@slow-1000": true,
		"iptables@slow-0": false, "iptables@slow-x": false, "iptables@slow-": false, "iptables@other": false,
		"iptables@skew": true, "iptables@blackhole-10": true, "iptables@blackhole-100": true,
		"iptables@blackhole-0": false, "iptables@blackhole-101": false, "iptables@blackhole-": false, "nftables@skew": false,
	} {
		assert.Equal(t, ok, Validate(ref) == nil, "%s: %v", ref, Validate(ref))
	}
}

// sleeper syncs in a fixed time.
type sleeper struct{ d time.Duration }

func (s sleeper) Name() string                  { return "sleeper" }
func (s sleeper) Cleanup(context.Context) error { return nil }
func (s sleeper) Sync(context.Context, *backends.State) (backends.SyncResult, error) {
	time.Sleep(s.d) // the inner sync's own work, not synchronisation
	return backends.SyncResult{Apply: s.d}, nil
}

func TestSlowedSyncTakesTheShareLonger(t *testing.T) {
	b := &slowed{wrapped: wrapped{sleeper{20 * time.Millisecond}, "sleeper@slow-50"}, slowdown: 0.5}
	start := time.Now()
	res, err := b.Sync(t.Context(), nil)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	assert.GreaterOrEqual(t, res.Apply, 30*time.Millisecond)
	assert.Equal(t, sleeper{20 * time.Millisecond}, b.Unwrap())
}

// recorder keeps the state of its last sync.
type recorder struct{ last *backends.State }

func (r *recorder) Name() string                  { return "recorder" }
func (r *recorder) Cleanup(context.Context) error { return nil }
func (r *recorder) Sync(_ context.Context, s *backends.State) (backends.SyncResult, error) {
	r.last = s
	return backends.SyncResult{}, nil
}

// TestBlackholedMovesTheChosenServices: blackhole-100 moves every endpoint of every
// Service into TEST-NET-1, distinct and sorted, without touching the caller's state;
// blackhole-N chooses about N% of Services, the same ones at every sync.
func TestBlackholedMovesTheChosenServices(t *testing.T) {
	ep := func(ip string, port int32) backends.Endpoint {
		return backends.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Ready: true, Serving: true}
	}
	sp := &backends.ServicePort{Name: backends.ServicePortName{Namespace: "default", Name: "web", Protocol: backends.TCP},
		Endpoints: []backends.Endpoint{ep("10.244.0.2", 8080), ep("10.244.0.3", 8080), ep("10.244.1.2", 8080)}}
	desired := &backends.State{Services: []*backends.ServicePort{sp}}
	r := &recorder{}
	b := &blackholed{wrapped: wrapped{r, "recorder@blackhole-100"}, share: 1}
	_, err := b.Sync(t.Context(), desired)
	require.NoError(t, err)
	got := r.last.Services[0].Endpoints
	require.Len(t, got, 3)
	for i, e := range got {
		assert.True(t, blackholeNet.Contains(e.IP), "%s", e)
		assert.True(t, e.Ready)
		if i > 0 {
			assert.Negative(t, got[i-1].AddrPort().Compare(e.AddrPort()), "distinct and sorted")
		}
	}
	assert.Equal(t, netip.MustParseAddr("10.244.0.2"), sp.Endpoints[0].IP, "the caller's state is untouched")

	tenth := &blackholed{wrapped: wrapped{Backend: r}, share: 0.1}
	chosen := 0
	for i := range 1000 {
		n := backends.ServicePortName{Namespace: "default", Name: "svc-" + strconv.Itoa(i)}
		if tenth.chosen(n) {
			chosen++
		}
		assert.Equal(t, tenth.chosen(n), tenth.chosen(n))
	}
	assert.InDelta(t, 100, chosen, 30, "about a tenth of 1000 Services")
}
