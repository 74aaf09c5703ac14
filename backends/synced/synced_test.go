//go:build linux

package synced_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/backends/synced"
)

// dns is a UDP service port with one endpoint per IP, beside a TCP one without endpoints.
func dns(ips ...string) *backends.State {
	var eps []backends.Endpoint
	for _, ip := range ips {
		eps = append(eps, backendstest.EP(ip+":53"))
	}
	return backendstest.State(
		backendstest.Service("kube-system/dns/udp", "10.96.0.10:53", eps...),
		backendstest.Service("ns/web", "10.96.0.11:80"),
	)
}

// TestFullSyncDecisions: full at first, after a failure, after ForceFullSync and Reset;
// partial otherwise.
func TestFullSyncDecisions(t *testing.T) {
	ctx := context.Background()
	tr := synced.New(nil)
	s := tr.Begin()
	assert.True(t, s.Full, "first sync")
	assert.False(t, tr.Programmed())
	require.NoError(t, tr.Done(ctx, s, dns()))
	assert.True(t, tr.Programmed())
	assert.False(t, tr.Begin().Full, "after a success")

	tr.ForceFullSync()
	s = tr.Begin()
	assert.True(t, s.Full, "forced")
	require.NoError(t, tr.Done(ctx, s, dns()))
	assert.False(t, tr.Begin().Full)

	tr.Failed()
	assert.True(t, tr.Begin().Full, "after a failure")
	require.NoError(t, tr.Done(ctx, tr.Begin(), dns()))

	tr.Reset()
	assert.False(t, tr.Programmed())
	assert.True(t, tr.Begin().Full, "after Reset")
}

// TestForceDuringSync: a ForceFullSync that arrives while a sync runs (the agent's
// periodic resync) is not forgotten when that sync succeeds.
func TestForceDuringSync(t *testing.T) {
	ctx := context.Background()
	tr := synced.New(nil)
	require.NoError(t, tr.Done(ctx, tr.Begin(), dns()))
	s := tr.Begin()
	require.False(t, s.Full)
	tr.ForceFullSync()
	require.NoError(t, tr.Done(ctx, s, dns()))
	assert.True(t, tr.Begin().Full)

	var f synced.FullSync // the zero value: full first
	s = f.Begin()
	assert.True(t, s.Full)
	f.ForceFullSync()
	f.Succeeded(s)
	assert.True(t, f.Begin().Full)
	f.Succeeded(f.Begin())
	assert.False(t, f.Begin().Full)
}

func TestChangedAndRemoved(t *testing.T) {
	ctx := context.Background()
	tr := synced.New(nil)
	before := dns("10.244.1.2")
	assert.Len(t, tr.Changed(before), 2, "everything is new before the first sync")
	require.NoError(t, tr.Done(ctx, tr.Begin(), before))
	before.Services[0].Endpoints = nil // the snapshot does not see later changes
	assert.Empty(t, tr.Changed(dns("10.244.1.2")))

	after := dns("10.244.1.3")
	after.Services = after.Services[:1] // web removed, dns changed
	dnsName := after.Services[0].Name
	assert.Equal(t, map[backends.ServicePortName]bool{dnsName: true}, tr.Changed(after))
	removed := tr.Removed(after)
	require.Len(t, removed, 1)
	for n := range removed {
		assert.Equal(t, "web", n.Name)
	}
	assert.Len(t, tr.Last(), 2)
}

// TestConntrackCleanup: after each successful sync the stale UDP entries go: at the
// first sync those made for a REJECT (nothing is known of the kernel), then those of
// removed endpoints.
func TestConntrackCleanup(t *testing.T) {
	ctx := context.Background()
	rejected := backendstest.UDPFlow("10.244.0.9:4000", "10.96.0.10:53", "10.96.0.10:53")
	toA := backendstest.UDPFlow("10.244.0.9:4001", "10.96.0.10:53", "10.244.1.2:53")
	toB := backendstest.UDPFlow("10.244.0.9:4002", "10.96.0.10:53", "10.244.1.3:53")
	ct := backendstest.NewConntrack(rejected)
	tr := synced.New(ct)
	require.NoError(t, tr.Done(ctx, tr.Begin(), dns("10.244.1.2", "10.244.1.3")))
	assert.Empty(t, ct.Flows(), "the REJECT's entries go at the first sync")
	ct.Add(toA, toB)
	require.NoError(t, tr.Done(ctx, tr.Begin(), dns("10.244.1.3")))
	assert.Equal(t, []conntrack.Flow{toB}, ct.Flows())

	// DoneWith deletes what the backend chose, and only that.
	require.NoError(t, tr.DoneWith(ctx, tr.Begin(), dns(), nil))
	assert.Equal(t, []conntrack.Flow{toB}, ct.Flows())
}

type failingTable struct{}

func (failingTable) DeleteMatching(context.Context, func(conntrack.Flow) bool) (int, error) {
	return 0, errors.New("netlink: boom")
}

// TestConntrackFailureKeepsPartial: a cleanup failure is an error, but the rules are in
// place, so the next sync is partial.
func TestConntrackFailureKeepsPartial(t *testing.T) {
	tr := synced.New(failingTable{})
	err := tr.Done(context.Background(), tr.Begin(), dns("10.244.1.2"))
	require.ErrorContains(t, err, "conntrack cleanup: netlink: boom")
	assert.True(t, tr.Programmed())
	assert.False(t, tr.Begin().Full)
}

// TestCheck: no check before anything was programmed; a failed check makes the next sync
// full and is returned.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	tr := synced.New(nil)
	calls := 0
	check := func(err error) func(context.Context) error {
		return func(context.Context) error { calls++; return err }
	}
	require.NoError(t, tr.Check(ctx, check(errors.New("never called"))))
	assert.Zero(t, calls)

	require.NoError(t, tr.Done(ctx, tr.Begin(), dns()))
	require.NoError(t, tr.Check(ctx, check(nil)))
	assert.False(t, tr.Begin().Full)
	require.ErrorContains(t, tr.Check(ctx, check(errors.New("canary gone"))), "canary gone")
	assert.True(t, tr.Begin().Full)
	assert.Equal(t, 2, calls)
}
