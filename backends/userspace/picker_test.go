package userspace

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable clock for the picker.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

var (
	epA = netip.MustParseAddrPort("10.1.0.1:80")
	epB = netip.MustParseAddrPort("10.1.0.2:80")
	epC = netip.MustParseAddrPort("10.1.0.3:80")
	cl1 = netip.MustParseAddr("192.168.0.1")
	cl2 = netip.MustParseAddr("192.168.0.2")
)

// step is one call on a picker in a scenario.
type step struct {
	advance  time.Duration    // clock moves before the call
	update   []netip.AddrPort // non-nil: update with these endpoints (and affinity of the case)
	client   netip.Addr
	reset    bool
	want     netip.AddrPort
	wantNone bool
}

func TestPicker(t *testing.T) {
	tests := []struct {
		name     string
		affinity bool
		ttl      time.Duration
		initial  []netip.AddrPort
		steps    []step
	}{
		{
			name:    "no endpoints",
			initial: nil,
			steps:   []step{{client: cl1, wantNone: true}},
		},
		{
			name:    "round robin alternates over all clients",
			initial: []netip.AddrPort{epA, epB},
			steps: []step{
				{client: cl1, want: epA}, {client: cl1, want: epB},
				{client: cl2, want: epA}, {client: cl1, want: epB},
			},
		},
		{
			name:    "endpoint change restarts the rotation",
			initial: []netip.AddrPort{epA, epB, epC},
			steps: []step{
				{client: cl1, want: epA},
				{update: []netip.AddrPort{epB, epC}, client: cl1, want: epB},
				{client: cl1, want: epC},
				{client: cl1, want: epB},
			},
		},
		{
			name:     "affinity sticks per client",
			affinity: true, ttl: time.Minute,
			initial: []netip.AddrPort{epA, epB},
			steps: []step{
				{client: cl1, want: epA}, {client: cl2, want: epB},
				{client: cl1, want: epA}, {client: cl2, want: epB}, {client: cl1, want: epA},
			},
		},
		{
			name:     "affinity expires after the timeout without traffic",
			affinity: true, ttl: time.Minute,
			initial: []netip.AddrPort{epA, epB},
			steps: []step{
				{client: cl1, want: epA},
				{advance: 59 * time.Second, client: cl1, want: epA}, // refreshed
				{advance: 59 * time.Second, client: cl1, want: epA},
				{advance: time.Minute, client: cl1, want: epB},
			},
		},
		{
			name:     "reset moves the client to the next endpoint and sticks there",
			affinity: true, ttl: time.Minute,
			initial: []netip.AddrPort{epA, epB},
			steps: []step{
				{client: cl1, want: epA},
				{client: cl1, reset: true, want: epB},
				{client: cl1, want: epB},
			},
		},
		{
			name:     "removed endpoint drops its clients, kept endpoint keeps them",
			affinity: true, ttl: time.Minute,
			initial: []netip.AddrPort{epA, epB},
			steps: []step{
				{client: cl1, want: epA}, {client: cl2, want: epB},
				{update: []netip.AddrPort{epB, epC}, client: cl2, want: epB},
				{client: cl1, want: epB}, // re-picked: rotation restarted at epB
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1000, 0)}
			p := newPicker(clk.now)
			p.update(tt.initial, tt.affinity, tt.ttl)
			for i, s := range tt.steps {
				clk.t = clk.t.Add(s.advance)
				if s.update != nil {
					p.update(s.update, tt.affinity, tt.ttl)
				}
				got, ok := p.pick(s.client, s.reset)
				if s.wantNone {
					assert.False(t, ok, "step %d", i)
					continue
				}
				require.True(t, ok, "step %d", i)
				assert.Equal(t, s.want, got, "step %d", i)
			}
		})
	}
}

func TestPickerAffinityOffForgets(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := newPicker(clk.now)
	p.update([]netip.AddrPort{epA, epB}, true, time.Minute)
	_, _ = p.pick(cl1, false)
	_, _ = p.pick(cl2, false)
	assert.Equal(t, 2, p.expire())
	p.update([]netip.AddrPort{epA, epB}, false, time.Minute)
	assert.Equal(t, 0, p.expire())
	got := []netip.AddrPort{}
	for range 4 {
		ep, _ := p.pick(cl1, false)
		got = append(got, ep)
	}
	assert.Equal(t, []netip.AddrPort{epA, epB, epA, epB}, got, "rotation continues, no stickiness")
}

func TestPickerExpire(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p := newPicker(clk.now)
	p.update([]netip.AddrPort{epA}, true, time.Minute)
	_, _ = p.pick(cl1, false)
	clk.t = clk.t.Add(30 * time.Second)
	_, _ = p.pick(cl2, false)
	clk.t = clk.t.Add(40 * time.Second)
	assert.Equal(t, 1, p.expire(), "cl1 idle 70s is gone, cl2 idle 40s stays")
	p.touch(cl2)
	clk.t = clk.t.Add(50 * time.Second)
	assert.Equal(t, 1, p.expire(), "touch refreshed cl2")
}
