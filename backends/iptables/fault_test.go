//go:build linux

package iptables

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// kernelRules returns the node's filter, nat and mangle tables as iptables-save prints them,
// normalised: comments and counters dropped, chains sorted by name with each chain's rules
// in order (iptables-nft lists chains in creation order, which differs between a fresh
// and a repairing sync without any difference in behaviour).
func kernelRules(t testing.TB, path string, f Flavor) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"filter", "nat", "mangle"} {
		b.WriteString(normalizeSave(save(t, path, f, table)))
	}
	return b.String()
}

func normalizeSave(dump string) string {
	var out strings.Builder
	var chains []string
	rules := map[string][]string{}
	flush := func() {
		slices.Sort(chains)
		for _, c := range chains {
			out.WriteString(c + "\n")
		}
		var names []string
		for n := range rules {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			for _, r := range rules[n] {
				out.WriteString(r + "\n")
			}
		}
		chains, rules = nil, map[string][]string{}
	}
	for _, l := range strings.Split(dump, "\n") {
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "*"):
			out.WriteString(l + "\n")
		case strings.HasPrefix(l, ":"):
			if i := strings.LastIndex(l, " ["); i > 0 {
				l = l[:i] // ":CHAIN POLICY [packets:bytes]"
			}
			chains = append(chains, l)
		case strings.HasPrefix(l, "-A "):
			chain := strings.Fields(l)[1]
			rules[chain] = append(rules[chain], l)
		case l == "COMMIT":
			flush()
			out.WriteString("COMMIT\n")
		default:
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// threeServices is twoServices with a third service and one endpoint fewer on the first:
// a change that needs both new chains and deleted ones.
func threeServices() *backends.State {
	return bt.State(
		bt.Service("ns1/a:p80", "172.30.0.1:80", bt.EPs(1, 1, 8080, 0)...),
		bt.Service("ns1/b:p80", "172.30.0.2:80", bt.EPs(1, 2, 9090, 0)...),
		bt.Service("ns1/c:p53/udp", "172.30.0.3:53", bt.EPs(1, 3, 5353, 0)...),
	)
}

// freshRules is what a brand-new backend's first full sync of st writes into an empty
// namespace: the reference every recovery must reach.
func freshRules(t *testing.T, f Flavor, st *backends.State) string {
	t.Helper()
	_, path := testutil.NewNetNS(t)
	b := New(Options{NodeName: "ref", NetNSPath: path, Flavor: f, LockFile: filepath.Join(t.TempDir(), "xtables.lock")})
	_, err := b.Sync(context.Background(), st)
	require.NoError(t, err)
	return kernelRules(t, path, f)
}

// removedSEPChains returns the endpoint chains of the nat table in path that a fresh sync of
// the reference rules does not have: the chains a sync to that state deletes.
func removedSEPChains(t *testing.T, path string, f Flavor, reference string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(save(t, path, f, "nat"), "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(l, ":"), " ")
		if strings.HasPrefix(l, ":KUBE-SEP-") && !strings.Contains(reference, ":"+name+" ") && !strings.Contains(reference, ":"+name+"\n") {
			out = append(out, name)
		}
	}
	return out
}

// TestFaultApplyingToolFails injects the three failures of the applying tool into a sync
// that changes the rules of a live node (one endpoint removed, one service added):
//
//   - a rule the kernel refuses: a foreign rule in nat OUTPUT jumps to the endpoint chain
//     the sync deletes, so the kernel refuses the restore's "-X KUBE-SEP-..." line;
//   - the restore binary missing from PATH;
//   - the xtables lock held by someone else, with LockWait 1s (legacy only: iptables-nft
//     takes no lock).
//
// Each time: the error names the node, the backend and the failing line (with its text) or
// step; the failure is counted; the kernel holds exactly what it held before (the restore
// is atomic); and the next sync, the fault gone, is full and leaves what a fresh full sync
// leaves.
func TestFaultApplyingToolFails(t *testing.T) {
	type fault struct {
		name    string
		flavors []Flavor
		// inject starts the fault and returns what the error must say and a function that
		// ends the fault.
		inject func(t *testing.T, path string, f Flavor, lockFile, reference string) (want []string, stop func())
		// restoreFailed says whether the restore itself ran and failed (RestoreFailures
		// counts those; the agent counts every failed sync).
		restoreFailed bool
	}
	faults := []fault{
		{
			name: "kernel refuses a rule", flavors: []Flavor{FlavorNFT, FlavorLegacy}, restoreFailed: true,
			inject: func(t *testing.T, path string, f Flavor, _, reference string) ([]string, func()) {
				gone := removedSEPChains(t, path, f, reference)
				require.Len(t, gone, 1, "the change removes one endpoint chain")
				foreign := []string{"-t", "nat", "-A", "OUTPUT", "-d", "192.0.2.1/32", "-j", gone[0]}
				require.NoError(t, ipt(t, path, f, foreign...))
				foreign[2] = "-D"
				return []string{"restore line ", "> ", "-X " + gone[0]}, func() { require.NoError(t, ipt(t, path, f, foreign...)) }
			},
		},
		{
			name: "restore binary missing", flavors: []Flavor{FlavorNFT, FlavorLegacy}, restoreFailed: true,
			inject: func(t *testing.T, _ string, _ Flavor, _, _ string) ([]string, func()) {
				// PATH holds every tool the backend runs but the restore binaries.
				dir := t.TempDir()
				orig := os.Getenv("PATH")
				iptN, _, saveN := FlavorNFT.Binaries()
				iptL, _, saveL := FlavorLegacy.Binaries()
				for _, name := range []string{iptN, saveN, iptL, saveL, "conntrack"} {
					if p, err := exec.LookPath(name); err == nil {
						require.NoError(t, os.Symlink(p, filepath.Join(dir, name)))
					}
				}
				t.Setenv("PATH", dir)
				return []string{"restore", "executable file not found"}, func() { t.Setenv("PATH", orig) }
			},
		},
		{
			name: "xtables lock held", flavors: []Flavor{FlavorLegacy},
			inject: func(t *testing.T, _ string, _ Flavor, lockFile, _ string) ([]string, func()) {
				fd, err := unix.Open(lockFile, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
				require.NoError(t, err)
				require.NoError(t, unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB))
				return []string{"xtables lock"}, func() { _ = unix.Close(fd) }
			},
		},
	}
	for _, ft := range faults {
		for _, f := range ft.flavors {
			t.Run(ft.name+"/"+string(f), func(t *testing.T) {
				requireFlavour(t, f)
				testutil.RequireBinary(t, "conntrack")
				want := freshRules(t, f, threeServices())
				_, path := testutil.NewNetNS(t)
				lockFile := filepath.Join(t.TempDir(), "xtables.lock")
				b := New(Options{NodeName: "node-7", NetNSPath: path, Flavor: f, LockFile: lockFile, LockWait: time.Second})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := b.Sync(ctx, twoServices())
				require.NoError(t, err)

				says, stop := ft.inject(t, path, f, lockFile, want)
				before := kernelRules(t, path, f)
				_, err = b.Sync(ctx, threeServices())
				after := kernelRules(t, path, f)
				stop()
				require.Error(t, err)
				msg := err.Error()
				t.Logf("error: %s", msg)
				for _, s := range append([]string{"sync node-7 " + b.Name() + ":"}, says...) {
					assert.Contains(t, msg, s)
				}
				if ft.restoreFailed {
					assert.Equal(t, 1, b.RestoreFailures(), "restore failures counted")
				}
				assert.Equal(t, before, after, "no partial state: the kernel holds what it held before")

				res, err := b.Sync(ctx, threeServices())
				require.NoError(t, err)
				assert.True(t, res.Full, "the sync after a failure is full")
				assert.Equal(t, want, kernelRules(t, path, f), "the recovery leaves what a fresh full sync leaves")
			})
		}
	}
}

// TestFaultTamperingDetected removes the node's rules behind the backend's back in three
// ways; CheckState notices each, and the next sync repairs the kernel to exactly the state
// of a fresh full sync. (The agent runs CheckState every CheckPeriod: backends/agent's
// canary fault test.)
func TestFaultTamperingDetected(t *testing.T) {
	tampers := []struct {
		name string
		do   func(t *testing.T, path string, f Flavor)
		want string
	}{
		{"flush nat", func(t *testing.T, path string, f Flavor) {
			require.NoError(t, ipt(t, path, f, "-t", "nat", "-F"))
		}, "jump PREROUTING -> KUBE-SERVICES is gone from table nat"},
		{"flush and delete nat chains", func(t *testing.T, path string, f Flavor) {
			require.NoError(t, ipt(t, path, f, "-t", "nat", "-F"))
			require.NoError(t, ipt(t, path, f, "-t", "nat", "-X"))
		}, "chain KUBE-PROXY-CANARY is gone from table nat"},
		{"firewall reload", func(t *testing.T, path string, f Flavor) {
			_, restore, _ := f.Binaries()
			in := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n" +
				"*mangle\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"
			_, err := netns.Tools{NSPath: path}.Exec(context.Background(), netns.Command{Path: restore, Args: []string{"-w"}, Stdin: []byte(in)})
			require.NoError(t, err)
		}, "chain KUBE-PROXY-CANARY is gone from table mangle"},
	}
	for _, f := range []Flavor{FlavorNFT, FlavorLegacy} {
		for _, tt := range tampers {
			t.Run(string(f)+"/"+tt.name, func(t *testing.T) {
				requireFlavour(t, f)
				testutil.RequireBinary(t, "conntrack")
				want := freshRules(t, f, twoServices())
				_, path := testutil.NewNetNS(t)
				b := New(Options{NodeName: "node-3", NetNSPath: path, Flavor: f, LockFile: filepath.Join(t.TempDir(), "xtables.lock")})
				ctx := context.Background()
				require.NoError(t, b.CheckState(ctx), "nothing to check before the first sync")
				_, err := b.Sync(ctx, twoServices())
				require.NoError(t, err)
				require.NoError(t, b.CheckState(ctx), "intact after a sync")

				tt.do(t, path, f)
				err = b.CheckState(ctx)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.want)

				res, err := b.Sync(ctx, twoServices())
				require.NoError(t, err)
				assert.True(t, res.Full, "a lost state makes the next sync full")
				assert.Equal(t, want, kernelRules(t, path, f))
				assert.NoError(t, b.CheckState(ctx), "repaired")
			})
		}
	}
}
