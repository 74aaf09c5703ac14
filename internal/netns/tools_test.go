//go:build linux

package netns_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/netns/netnstest"
	"kpbench.dev/kpbench/internal/testutil"
)

// TestToolsExecRunsFromTheRoot: with a root, a tool is found and runs inside it (the
// script's log lands in the root, its output comes back), inside the namespace; a tool
// the root lacks is an error naming the root, even when the host has it.
func TestToolsExecRunsFromTheRoot(t *testing.T) {
	_, nsPath := testutil.NewNetNS(t)
	root := netnstest.NewFakeRoot(t, map[string]string{"iptables-nft-save": "*nat\nCOMMIT"}, "nft", "iptables-nft-save")
	tools := netns.Tools{NSPath: nsPath, Root: root.Dir}

	res, err := tools.Exec(context.Background(), netns.Command{Path: "nft", Args: []string{"--version"}})
	require.NoError(t, err)
	assert.Equal(t, "nft "+netnstest.FakeVersion+" (fake)\n", string(res.Stdout))

	res, err = tools.Exec(context.Background(), netns.Command{Path: "iptables-nft-save", Args: []string{"-t", "nat"}})
	require.NoError(t, err)
	assert.Equal(t, "*nat\nCOMMIT\n", string(res.Stdout))
	assert.Equal(t, []string{"nft --version", "iptables-nft-save -t nat"}, root.Calls(t))

	_, err = tools.Exec(context.Background(), netns.Command{Path: "ipset", Args: []string{"list"}})
	require.ErrorContains(t, err, "ipset: not found in tool root "+root.Dir)

	p, err := tools.Resolve("/usr/sbin/nft")
	require.NoError(t, err)
	assert.Equal(t, "/usr/sbin/nft", p)
	_, err = tools.Resolve("usr/sbin/nft")
	assert.ErrorContains(t, err, "must be absolute")
}

// TestToolsExecHost: the zero root is the host's tools, as netns.Exec.
func TestToolsExecHost(t *testing.T) {
	_, nsPath := testutil.NewNetNS(t)
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	res, err := netns.Tools{NSPath: nsPath}.Exec(context.Background(), netns.Command{Path: sh, Args: []string{"-c", "echo host"}})
	require.NoError(t, err)
	assert.Equal(t, "host\n", string(res.Stdout))
}

// TestToolsDoChrootsOneThread: programs exec'd by a library inside Do (as go-iptables
// does, with its own exec.LookPath) come from the root; the process's other threads, and
// the thread itself afterwards, keep the host's root.
func TestToolsDoChrootsOneThread(t *testing.T) {
	_, nsPath := testutil.NewNetNS(t)
	root := netnstest.NewFakeRoot(t, nil, "iptables-legacy")
	tools := netns.Tools{NSPath: nsPath, Root: root.Dir}
	var lookedUp string
	err := tools.Do(func() error {
		p, err := exec.LookPath("iptables-legacy")
		if err != nil {
			return err
		}
		lookedUp = p
		if _, err := os.Stat("/kpbench-argv.log"); !os.IsNotExist(err) {
			return err // nothing logged yet
		}
		return exec.Command(p, "-w", "-t", "nat", "-N", "KUBE-SERVICES").Run()
	})
	require.NoError(t, err)
	assert.Equal(t, "/usr/sbin/iptables-legacy", lookedUp)
	assert.Equal(t, []string{"iptables-legacy -w -t nat -N KUBE-SERVICES"}, root.Calls(t))
	_, err = os.Stat(filepath.Join(root.Dir, "kpbench-argv.log"))
	assert.NoError(t, err, "the host's root is back: the root's log is under its directory")
	_, err = os.Stat("/kpbench-argv.log")
	assert.True(t, os.IsNotExist(err), "nothing was written to the host's /")

	err = tools.Do(func() error { return exec.Command("ipset", "list").Run() })
	assert.Error(t, err, "ipset is not in the root, whatever the host has")
}

// TestToolsDoNeedsDevNull: a root without /dev/null is refused before anything runs,
// rather than failing inside the library with "open /dev/null: no such file".
func TestToolsDoNeedsDevNull(t *testing.T) {
	_, nsPath := testutil.NewNetNS(t)
	root := netnstest.NewFakeRoot(t, nil, "iptables-legacy")
	require.NoError(t, os.Remove(filepath.Join(root.Dir, "dev", "null")))
	ran := false
	err := netns.Tools{NSPath: nsPath, Root: root.Dir}.Do(func() error { ran = true; return nil })
	assert.ErrorContains(t, err, "has no /dev/null device")
	assert.False(t, ran)
}
