//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends/ipvs"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/internal/upstream/upstreamtest"
	"kpbench.dev/kpbench/kubestack"
	"kpbench.dev/kpbench/lab"
)

func TestClusterBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no name", []string{"cluster", "up", "--proxy", "iptables", "--dir", dir}, `required flag(s) "name" not set`},
		{"no proxy", []string{"cluster", "up", "--name", "x", "--dir", dir}, `required flag(s) "proxy" not set`},
		{"unknown proxy", []string{"cluster", "up", "--name", "x", "--proxy", "userspace", "--dir", dir}, `proxy "userspace": allowed values are iptables, nftables, ipvs`},
		{"no nodes", []string{"cluster", "up", "--name", "x", "--proxy", "iptables", "--nodes", "0", "--dir", dir}, "--nodes 0: allowed values are 1-16"},
		{"too many nodes", []string{"cluster", "up", "--name", "x", "--proxy", "iptables", "--nodes", "17", "--dir", dir}, "--nodes 17: allowed values are 1-16"},
		{"bad name", []string{"cluster", "up", "--name", "Demo", "--proxy", "iptables", "--dir", dir}, `lab name "Demo": must be 1-10 characters`},
		{"bad port", []string{"cluster", "up", "--name", "x", "--proxy", "iptables", "--port", "70000", "--dir", dir}, "port: 70000 is out of range"},
		{"bad min sync", []string{"cluster", "up", "--name", "x", "--proxy", "iptables", "--kube-proxy-min-sync-period", "0s", "--dir", dir}, "must be positive"},
		{"status: unknown cluster", []string{"cluster", "status", "--name", "nope", "--dir", dir}, "no such cluster"},
		{"status: bad output", []string{"cluster", "status", "--name", "nope", "-o", "yaml", "--dir", dir}, "allowed values are table, json"},
		{"down: no target", []string{"cluster", "down", "--dir", dir}, "exactly one of"},
	}
	downUnknown := []string{"cluster", "down", "--name", "nope", "--dir", dir} // reads the records as root
	if ipvs.Probe("/proc/self/ns/net") != nil {
		tests = append(tests, struct {
			name    string
			args    []string
			wantErr string
		}{"ipvs where the kernel has none", []string{"cluster", "up", "--name", "x", "--proxy", "ipvs", "--dir", dir}, "proxy ipvs: kernel has no IPVS"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(tt.args, &out, &errOut)
			assert.Equal(t, exitBadInput, code, "stderr: %s", errOut.String())
			assert.Contains(t, errOut.String(), tt.wantErr)
		})
	}
	t.Run("down: unknown cluster", func(t *testing.T) {
		testutil.RequireRoot(t)
		var out, errOut bytes.Buffer
		assert.Equal(t, exitBadInput, run(downUnknown, &out, &errOut), "stderr: %s", errOut.String())
		assert.Contains(t, errOut.String(), "no such cluster")
	})
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "bad input builds nothing")
}

// TestClusterCrashIsSwept runs `kpbench cluster up` in a child process, reads `cluster
// status -o json` and runs a command on a node with `lab exec`, then kills the owner with
// SIGKILL: `cluster down --all` removes everything it left (the components died with it),
// and nothing of the cluster remains: no namespace, process, listener or file.
func TestClusterCrashIsSwept(t *testing.T) {
	testutil.RequireRoot(t)
	upstreamtest.Require(t, upstream.Etcd, upstream.KubeAPIServer, upstream.KubeControllerManager, upstream.KubeScheduler, upstream.KubeProxy, upstream.CoreDNS)
	dir := t.TempDir()
	name := "t" + testutil.RandomID(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	child := startKpbench(ctx, t, "cluster", "up", "--name", name, "--nodes", "1", "--proxy", "iptables", "--clients", "0", "--dir", dir)
	reg := kubestack.Registry{Dir: dir}
	var rec *kubestack.Record
	require.Eventually(t, func() bool {
		r, err := reg.Read(name)
		if err == nil && r.State == lab.StateReady {
			rec = r
		}
		return rec != nil || child.cmd.ProcessState != nil
	}, 4*time.Minute, 200*time.Millisecond, "cluster ready:\n%s", child.out.String())
	require.NotNil(t, rec, "the owner exited:\n%s", child.out.String())
	assert.Equal(t, child.cmd.Process.Pid, rec.PID)

	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"cluster", "status", "--name", name, "-o", "json", "--dir", dir}, &out, &errOut), errOut.String())
	var st clusterStatus
	require.NoError(t, json.Unmarshal(out.Bytes(), &st))
	assert.True(t, st.OwnerAlive)
	assert.Equal(t, lab.StateReady, st.State)
	assert.Equal(t, reg.Kubeconfig(name), st.Kubeconfig)
	assert.Positive(t, st.Startup.Total)
	components := map[string]bool{}
	for _, m := range st.Memory {
		assert.Empty(t, m.Error, "%s", m.Component)
		assert.Positive(t, m.RSS, "%s", m.Component)
		components[m.Component] = true
	}
	for _, c := range []string{"kpbench", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		assert.True(t, components[c], "memory of %s", c)
	}

	out.Reset()
	errOut.Reset()
	require.Equal(t, exitOK, run([]string{"lab", "exec", name, "node-0", "--", "ip", "-o", "-4", "addr", "show", "eth0"}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "172.18.0.10/24")
	out.Reset()
	require.Equal(t, exitOK, run([]string{"lab", "exec", name, "cp", "--", "ip", "-o", "-4", "addr", "show", "eth0"}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "172.18.0.2/24", "the control plane's namespace is a host of lab exec too")

	// Crash: the owner dies without tearing down.
	require.NoError(t, syscall.Kill(child.cmd.Process.Pid, syscall.SIGKILL))
	_ = child.cmd.Wait()
	out.Reset()
	require.Equal(t, exitOK, run([]string{"cluster", "down", "--all", "--dir", dir}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "removed 1 clusters ["+name+"]")

	left, err := netns.List(netns.Prefix + "-" + name + "-")
	require.NoError(t, err)
	assert.Empty(t, left, "namespaces left")
	for _, p := range rec.Processes {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
		assert.True(t, err != nil || exe != p.Binary, "%s (pid %d) still runs", p.Component, p.PID)
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(rec.Server, "https://"), time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "nothing listens on %s", rec.Server)
	_, err = reg.Read(name)
	assert.True(t, errors.Is(err, lab.ErrNotRegistered), "record gone: %v", err)
	_, err = lab.Registry{Dir: lab.DefaultRegistryDir}.Read(name)
	assert.ErrorIs(t, err, lab.ErrNotRegistered)
}
