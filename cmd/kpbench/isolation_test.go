//go:build linux

package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/reports"
)

// TestTwoRunsAtOnce runs two kpbench processes at the same time, the seed nginx NodePort
// scenario on iptables-legacy and on nftables: both labs (same addressing plan) exist at
// once, and each run passes every expectation with its own traffic.
func TestTwoRunsAtOnce(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "iptables-legacy-restore", "nft")
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "examples", "nginx-nodeport.scenario.yaml"))
	require.NoError(t, err)
	manifest, err := filepath.Abs(filepath.Join("..", "..", "scenarios", "examples", "nginx-nodeport.yaml"))
	require.NoError(t, err)
	// The same scenario, with a pause after the first sync so that the two runs overlap.
	sc := strings.Replace(string(src), "- file: nginx-nodeport.yaml", "- file: "+manifest, 1)
	sc = strings.Replace(sc, "steps:\n", "steps:\n- {name: overlap, wait: {duration: 3s}}\n", 1)
	scPath := filepath.Join(dir, "nginx.yaml")
	require.NoError(t, os.WriteFile(scPath, []byte(sc), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	backends := []string{"iptables-legacy", "nftables"}
	var children []*kpbenchChild
	for _, backend := range backends {
		children = append(children, startKpbench(ctx, t, "run", scPath, "--backend", backend, "--out", filepath.Join(dir, backend)))
	}

	// Both labs exist at the same time (polling the registry, bounded by ctx).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var labs [2]string
	for labs[0] == "" || labs[1] == "" {
		select {
		case <-ctx.Done():
			t.Fatalf("the two labs never existed at once: %v\n%s\n%s", ctx.Err(), children[0].out.String(), children[1].out.String())
		case <-tick.C:
		}
		for i, c := range children {
			labs[i] = ownedLab(t, c.cmd.Process.Pid)
		}
	}
	assert.NotEqual(t, labs[0], labs[1])
	// While both run (echo servers, health servers and proxies open): none of their sockets
	// listens in the host's root namespace, this test's own.
	for _, c := range children {
		assert.Empty(t, rootListeners(t, c.cmd.Process.Pid), "kpbench %d listens in the root namespace", c.cmd.Process.Pid)
	}

	for i, c := range children {
		require.NoError(t, c.cmd.Wait(), "kpbench on %s:\n%s", backends[i], c.out.String())
		data, err := os.ReadFile(filepath.Join(dir, backends[i], reports.ResultsFile))
		require.NoError(t, err)
		var res reports.Results
		require.NoError(t, json.Unmarshal(data, &res))
		require.Len(t, res.Cases, 3, "the scenario's three expectations")
		for _, cs := range res.Cases {
			assert.Equal(t, reports.CasePass, cs.Result, "%s on %s: %s", cs.Name, cs.Backend, cs.Reason)
		}
	}
	for _, name := range labs {
		assert.Empty(t, nsList(t, "kpb-"+name+"-"), "lab %s left namespaces behind", name)
	}
}

// rootListeners returns the TCP listeners and bound UDP sockets of this (the root)
// namespace that belong to process pid, as "file:local-address".
func rootListeners(t *testing.T, pid int) []string {
	t.Helper()
	owned := map[string]bool{} // socket inodes of pid
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	require.NoError(t, err)
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			owned[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	// /proc/self/net is the namespace of the process's main thread; read this thread's, an
	// unlocked Go thread's, checked to be the root namespace.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.ErrorIs(t, netns.Guard(), netns.ErrRootNamespace, "this thread must be in the root namespace")
	var out []string
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		data, err := os.ReadFile(filepath.Join("/proc/thread-self/net", f))
		require.NoError(t, err)
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
			fields := strings.Fields(line)
			if len(fields) < 10 {
				continue
			}
			listening := fields[3] == "0A" || strings.HasPrefix(f, "udp") // TCP_LISTEN; any bound UDP socket
			if listening && owned[fields[9]] {
				out = append(out, f+":"+fields[1])
			}
		}
	}
	return out
}

// TestRootListenersSees proves rootListeners can fail: a loopback listener of this
// process, in the root namespace, is found.
func TestRootListenersSees(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	assert.NotEmpty(t, rootListeners(t, os.Getpid()))
}
