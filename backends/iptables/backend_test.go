//go:build linux

package iptables

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/backends/conntrack"
	"kpbench.dev/kpbench/internal/netns"
)

type exitErr int

func (e exitErr) Error() string { return "exit status " + string(rune('0'+int(e))) }
func (e exitErr) ExitCode() int { return int(e) }

// fakeExec records commands; respond decides each outcome (nil: success).
type fakeExec struct {
	cmds    []netns.Command
	respond func(cmd netns.Command) (execResult, error)
}

func (f *fakeExec) Exec(_ context.Context, cmd netns.Command) (execResult, error) {
	f.cmds = append(f.cmds, cmd)
	if f.respond != nil {
		return f.respond(cmd)
	}
	return execResult{}, nil
}

func (f *fakeExec) restores() []netns.Command {
	var out []netns.Command
	for _, c := range f.cmds {
		if strings.HasSuffix(c.Path, "-restore") {
			out = append(out, c)
		}
	}
	return out
}

func twoServices() *backends.State {
	return bt.State(
		bt.Service("ns1/a:p80", "172.30.0.1:80", bt.EPs(1, 2, 8080, 0)...),
		bt.Service("ns1/b:p80", "172.30.0.2:80", bt.EPs(1, 2, 9090, 0)...),
	)
}

func natServiceChains(t *testing.T, input []byte) []string {
	t.Helper()
	s, err := ParseRestore(input)
	require.NoError(t, err)
	var out []string
	for _, c := range s.Chains["nat"] {
		if IsServiceChain(c) {
			out = append(out, c)
		}
	}
	return out
}

func TestSyncFullThenPartial(t *testing.T) {
	fx := &fakeExec{respond: func(cmd netns.Command) (execResult, error) {
		if slices4(cmd.Args, "-C") {
			return execResult{}, exitErr(1)
		}
		return execResult{}, nil
	}}
	b := newBackend(Options{NodeName: "node-1", Flavor: FlavorLegacy, LockFile: "/run/kpb-x.lock", MasqueradeBit: 14}, fx, bt.NewConntrack())
	assert.Equal(t, "iptables-legacy", b.Name())
	ctx := context.Background()

	st := twoServices()
	res, err := b.Sync(ctx, st)
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Equal(t, 2, res.ChangedServices)
	require.Len(t, fx.restores(), 1)
	r := fx.restores()[0]
	assert.Equal(t, "iptables-legacy-restore", r.Path)
	assert.Equal(t, []string{"-w", "--noflush", "--counters"}, r.Args)
	assert.Equal(t, []string{"XTABLES_LOCKFILE=/run/kpb-x.lock"}, r.Env)
	assert.Contains(t, string(r.Stdin), "*mangle\n:KUBE-PROXY-CANARY")
	assert.Equal(t, "iptables-legacy-save", fx.cmds[0].Path, "first sync lists existing chains")
	var inserts int
	for _, c := range fx.cmds {
		if slices4(c.Args, "-I") {
			inserts++
		}
	}
	assert.Equal(t, len(Jumps()), inserts)

	// Unchanged state: partial, nothing of the services written.
	fx.cmds = nil
	res, err = b.Sync(ctx, twoServices())
	require.NoError(t, err)
	assert.False(t, res.Full)
	assert.Equal(t, 0, res.ChangedServices)
	assert.Equal(t, []string{"-w", "-t", "mangle", "-S", ChainCanary}, fx.cmds[0].Args)
	assert.Empty(t, natServiceChains(t, fx.restores()[0].Stdin))

	// Change service b's endpoints: only b's chains, and b's stale endpoint chain deleted.
	st2 := twoServices()
	st2.Services[1].Endpoints = bt.EPs(1, 1, 9090, 0)
	fx.cmds = nil
	res, err = b.Sync(ctx, st2)
	require.NoError(t, err)
	assert.False(t, res.Full)
	assert.Equal(t, 1, res.ChangedServices)
	in := fx.restores()[0].Stdin
	b2 := st2.Services[1]
	stale := EndpointChain(b2.Name, bt.EPs(1, 2, 9090, 0)[1])
	assert.ElementsMatch(t, []string{ServiceChain(b2.Name), EndpointChain(b2.Name, b2.Endpoints[0]), stale}, natServiceChains(t, in))
	assert.Contains(t, string(in), "-X "+stale+"\n")
	assert.NotContains(t, string(in), "*mangle")
	assert.NotContains(t, string(in), ServiceChain(st2.Services[0].Name)+" - [0:0]")
	assert.Contains(t, string(in), "-j "+ServiceChain(st2.Services[0].Name), "KUBE-SERVICES is always rewritten")

	// Remove service a: its chains are deleted.
	st3 := bt.State(st2.Services[1])
	fx.cmds = nil
	_, err = b.Sync(ctx, st3)
	require.NoError(t, err)
	in = fx.restores()[0].Stdin
	a := st2.Services[0]
	for _, c := range []string{ServiceChain(a.Name), EndpointChain(a.Name, a.Endpoints[0]), EndpointChain(a.Name, a.Endpoints[1])} {
		assert.Contains(t, string(in), "-X "+c+"\n")
	}
}

func slices4(args []string, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

func TestSyncRestoreErrorThenFull(t *testing.T) {
	fail := true
	fx := &fakeExec{}
	fx.respond = func(cmd netns.Command) (execResult, error) {
		if strings.HasSuffix(cmd.Path, "-restore") && fail {
			fail = false
			return execResult{Stderr: []byte("iptables-restore v1.8.9 (nf_tables): line 9 failed\n")}, errors.New("iptables-nft-restore: exit status 1")
		}
		return execResult{}, nil
	}
	b := newBackend(Options{NodeName: "node-2"}, fx, bt.NewConntrack())
	b.ipt, b.restore, b.save = FlavorNFT.Binaries()
	ctx := context.Background()
	_, err := b.Sync(ctx, twoServices())
	require.Error(t, err)
	var re *RestoreError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 9, re.Line)
	assert.True(t, strings.HasPrefix(err.Error(), "sync node-2 iptables: restore line 9: "), err.Error())
	lines := strings.Split(re.Context, "\n")
	require.Len(t, lines, 5)
	assert.True(t, strings.HasPrefix(lines[0], "  7: "))
	assert.True(t, strings.HasPrefix(lines[2], "> 9: "))
	input := strings.Split(string(fx.restores()[0].Stdin), "\n")
	assert.Equal(t, "> 9: "+input[8], lines[2])
	assert.Equal(t, 1, b.RestoreFailures())

	fx.cmds = nil
	res, err := b.Sync(ctx, twoServices())
	require.NoError(t, err)
	assert.True(t, res.Full, "the sync after a failure is full")
	assert.NotEqual(t, []string{"-w", "-t", "mangle", "-S", ChainCanary}, fx.cmds[0].Args, "no canary check before a full sync")
}

func TestSyncCanaryGoneAndForceFull(t *testing.T) {
	canary := true
	fx := &fakeExec{respond: func(cmd netns.Command) (execResult, error) {
		if slices4(cmd.Args, "-S") && !canary {
			return execResult{Stderr: []byte("iptables: No chain/target/match by that name.\n")}, exitErr(1)
		}
		return execResult{}, nil
	}}
	b := newBackend(Options{NodeName: "n"}, fx, bt.NewConntrack())
	ctx := context.Background()
	_, err := b.Sync(ctx, twoServices())
	require.NoError(t, err)
	canary = false
	res, err := b.Sync(ctx, twoServices())
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Equal(t, "chain KUBE-PROXY-CANARY is gone from table mangle", res.FullReason)
	canary = true
	res, err = b.Sync(ctx, twoServices())
	require.NoError(t, err)
	assert.False(t, res.Full)
	b.ForceFullSync()
	res, err = b.Sync(ctx, twoServices())
	require.NoError(t, err)
	assert.True(t, res.Full)
	assert.Empty(t, res.FullReason, "a forced full sync is not the backend's own decision")
}

// TestSyncCanaryListingFails: exit status 1 is iptables's "some error"; only the stderr
// of a missing chain (or table) makes the next sync full. Any other failure of the
// listing is the sync's error, never a silent full rewrite (a full rewrite timed as a
// partial sync once made a 210 s "partial" at 5k services).
func TestSyncCanaryListingFails(t *testing.T) {
	tests := []struct {
		stderr   string
		wantFull bool
		wantErr  bool
	}{
		{stderr: "iptables: No chain/target/match by that name.", wantFull: true},
		{stderr: "iptables v1.8.9 (nf_tables): chain `KUBE-PROXY-CANARY' in table `mangle' is incompatible, use 'nft' tool.", wantFull: true},
		{stderr: "iptables: Resource temporarily unavailable.", wantErr: true},
		{stderr: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.stderr, func(t *testing.T) {
			fail := false
			fx := &fakeExec{respond: func(cmd netns.Command) (execResult, error) {
				if slices4(cmd.Args, "-S") && fail {
					return execResult{Stderr: []byte(tt.stderr)}, exitErr(1)
				}
				return execResult{}, nil
			}}
			b := newBackend(Options{NodeName: "n"}, fx, bt.NewConntrack())
			ctx := context.Background()
			_, err := b.Sync(ctx, twoServices())
			require.NoError(t, err)
			fail = true
			res, err := b.Sync(ctx, twoServices())
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "check canary")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantFull, res.Full)
		})
	}
}

func TestStaleUDPConntrack(t *testing.T) {
	udp := func(endpoints []backends.Endpoint) *backends.State {
		sp := bt.Service("ns1/dns:p53/udp", "172.30.0.10:53", endpoints...)
		sp.NodePort = 30053
		return bt.State(sp)
	}
	two := bt.EPs(1, 2, 5353, 0)
	ct := bt.NewConntrack(
		conntrack.Flow{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("172.30.0.10:53"), ReplySrc: two[0].AddrPort()},
		conntrack.Flow{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("172.30.0.10:53"), ReplySrc: two[1].AddrPort()},
		conntrack.Flow{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("192.168.0.1:30053"), ReplySrc: two[1].AddrPort()},
		conntrack.Flow{Proto: 6, OrigDst: netip.MustParseAddrPort("172.30.0.10:53"), ReplySrc: two[1].AddrPort()},
		conntrack.Flow{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("172.30.0.99:53"), ReplySrc: two[1].AddrPort()},
	)
	b := newBackend(Options{NodeName: "n"}, &fakeExec{}, ct)
	ctx := context.Background()
	_, err := b.Sync(ctx, udp(two))
	require.NoError(t, err)
	// The service got its first endpoints: every UDP entry to its addresses is flushed.
	assert.Len(t, ct.Flows(), 2)

	ct.Replace(
		conntrack.Flow{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("172.30.0.10:53"), ReplySrc: two[0].AddrPort()},
		conntrack.Flow{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("172.30.0.10:53"), ReplySrc: two[1].AddrPort()},
		conntrack.Flow{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("192.168.0.1:30053"), ReplySrc: two[1].AddrPort()},
	)
	_, err = b.Sync(ctx, udp(two[:1]))
	require.NoError(t, err)
	// Endpoint two[1] went away: its entries (ClusterIP and NodePort) are gone, two[0]'s stay.
	assert.Equal(t, []conntrack.Flow{{Proto: conntrack.ProtoUDP, OrigDst: netip.MustParseAddrPort("172.30.0.10:53"), ReplySrc: two[0].AddrPort()}}, ct.Flows())
}

func TestCleanupCommands(t *testing.T) {
	fx := &fakeExec{respond: func(cmd netns.Command) (execResult, error) {
		switch {
		case slices4(cmd.Args, "-D"):
			return execResult{}, exitErr(1)
		case strings.HasSuffix(cmd.Path, "-save") && cmd.Args[1] == "nat":
			return execResult{Stdout: []byte("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-X - [0:0]\n:OTHER - [0:0]\nCOMMIT\n")}, nil
		}
		return execResult{}, nil
	}}
	b := newBackend(Options{NodeName: "n"}, fx, bt.NewConntrack())
	require.NoError(t, b.Cleanup(context.Background()))
	r := fx.restores()
	require.Len(t, r, 1)
	assert.Equal(t, "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-X - [0:0]\n-X KUBE-SERVICES\n-X KUBE-SVC-X\nCOMMIT\n", string(r[0].Stdin))
}
