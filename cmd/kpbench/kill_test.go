//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/lab"
)

// childArgsEnv carries the arguments of a kpbench run in a child process of this test
// binary (TestHelperKpbench).
const childArgsEnv = "KPBENCH_TEST_CHILD_ARGS"

// TestHelperKpbench is not a test: it runs kpbench with the arguments in childArgsEnv,
// so that a test can kill a real kpbench process.
func TestHelperKpbench(t *testing.T) {
	args := os.Getenv(childArgsEnv)
	if args == "" {
		t.Skip("helper process only")
	}
	os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

// kpbenchChild is a real kpbench process: this test binary running TestHelperKpbench.
type kpbenchChild struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startKpbench starts `kpbench args...` in a child process, ended with ctx. Whatever the
// test's outcome, its cleanup kills and reaps the child, then sweeps the labs whose owner
// is gone (the child's, which a killed kpbench cannot remove itself).
func startKpbench(ctx context.Context, t *testing.T, args ...string) *kpbenchChild {
	t.Helper()
	return startKpbenchUnder(ctx, t, "", nil, args...)
}

// startKpbenchUnder is startKpbench with the child started in directory dir ("": this
// process's) by a wrapper command (strace, say): wrapper... kpbench args.... The child gets a process group of its own, and the
// cleanup kills the whole group, so a wrapper's death does not leave kpbench running.
func startKpbenchUnder(ctx context.Context, t *testing.T, dir string, wrapper []string, args ...string) *kpbenchChild {
	t.Helper()
	argv := append(append([]string(nil), wrapper...), os.Args[0], "-test.run=^TestHelperKpbench$")
	c := &kpbenchChild{cmd: exec.CommandContext(ctx, argv[0], argv[1:]...)}
	c.cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join(args, "\x1f"))
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	c.cmd.Dir = dir
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, c.cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		_ = c.cmd.Wait() // reaped: a zombie owner would make its lab look alive
		_, err := lab.DownAll(lab.Registry{Dir: lab.DefaultRegistryDir}, lab.DownOptions{})
		assert.NoError(t, err, "sweeping the labs of killed kpbench processes")
	})
	return c
}

// TestKillMidSyncLeavesNothing kills kpbench with SIGKILL while iptables-nft-restore
// programs 20,000 Services: the restore dies with it, `lab down --all` removes the lab,
// and the host's root namespace is as it was.
func TestKillMidSyncLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-nft-restore", "nft")
	before := rootState(t)
	dir := t.TempDir()
	sc := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(sc, []byte(`apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: kill-mid-sync
topology: {nodes: 1, clients: 0}
steps:
- {name: grow, churn: {pattern: add, services: 20000, endpointsPerService: 2, allAtOnce: true}}
- {name: synced, wait: {synced: true, timeout: 20m}}
`), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startKpbench(ctx, t, "run", sc, "--backend", "iptables", "--out", filepath.Join(dir, "out"))
	child, out := c.cmd, &c.out

	// Wait (polling, bounded) until the child's restore of the 20k Services is running.
	var restore int
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for restore == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no iptables-nft-restore under kpbench (pid %d): %v\n%s", child.Process.Pid, ctx.Err(), out.String())
		case <-tick.C:
		}
		restore = descendant(t, child.Process.Pid, "iptables-nft-re")
	}
	labName := ownedLab(t, child.Process.Pid)
	require.NotEmpty(t, labName, "the child's lab is in the registry")
	require.NotEmpty(t, nsList(t, "kpb-"+labName+"-"))

	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	// The restore was tied to its thread (Pdeathsig): it goes with kpbench.
	for alive(restore) {
		select {
		case <-ctx.Done():
			t.Fatalf("iptables-nft-restore (pid %d) outlived the killed kpbench", restore)
		case <-tick.C:
		}
	}

	res, err := lab.DownAll(lab.Registry{Dir: lab.DefaultRegistryDir}, lab.DownOptions{})
	require.NoError(t, err)
	assert.Contains(t, res.Removed, labName)
	assert.Empty(t, nsList(t, "kpb-"+labName+"-"), "namespaces left behind")
	assert.NoDirExists(t, lab.Registry{Dir: lab.DefaultRegistryDir}.StateDir(labName), "the lab's state directory left behind")
	assert.Equal(t, before, rootState(t), "the host's root namespace changed")
}

// descendant returns the pid of a process named comm below pid, or 0.
func descendant(t *testing.T, pid int, comm string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); strings.TrimSpace(string(c)) != comm {
			continue
		}
		for q := p; q > 1; q = parent(q) {
			if q == pid {
				return p
			}
		}
	}
	return 0
}

// parent returns pid's parent pid (0 when it is gone).
func parent(pid int) int {
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

// alive reports whether pid still runs (a zombie counts as gone).
func alive(pid int) bool {
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// ownedLab returns the name of the registered lab whose owner is pid.
func ownedLab(t *testing.T, pid int) string {
	t.Helper()
	reg := lab.Registry{Dir: lab.DefaultRegistryDir}
	names, err := reg.List()
	require.NoError(t, err)
	for _, n := range names {
		if rec, err := reg.Read(n); err == nil && rec.PID == pid {
			return n
		}
	}
	return ""
}

func nsList(t *testing.T, prefix string) []string {
	t.Helper()
	names, err := netns.List(prefix)
	require.NoError(t, err)
	return names
}

// rootState reads (never writes) the host's root namespace: its nftables ruleset (which
// holds iptables-nft's rules too) and its links.
func rootState(t *testing.T) string {
	t.Helper()
	rules, err := exec.Command("nft", "list", "ruleset").Output()
	require.NoError(t, err)
	links, err := netlink.LinkList()
	require.NoError(t, err)
	var b strings.Builder
	b.Write(rules)
	for _, l := range links {
		b.WriteString("link " + l.Attrs().Name + "\n")
	}
	return b.String()
}
