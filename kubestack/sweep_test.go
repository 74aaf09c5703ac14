//go:build linux

package kubestack

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/lab"
)

// TestSweepKillsOnlyWhatStillRunsItsBinary: a dead owner's recorded process that still
// runs its binary is killed; a recorded pid that now runs another program (here: this test)
// is left alone; the record goes.
func TestSweepKillsOnlyWhatStillRunsItsBinary(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	child := exec.Command(sleep, "60")
	require.NoError(t, child.Start())
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() { _ = child.Process.Kill() })
	bin, err := filepath.EvalSymlinks(sleep)
	require.NoError(t, err)
	require.True(t, runs(child.Process.Pid, bin))
	require.False(t, runs(os.Getpid(), bin))

	reg := Registry{Dir: t.TempDir(), Labs: lab.Registry{Dir: t.TempDir()}}
	rec := &Record{Entry: lab.Entry{Name: "gone"}, Processes: []ProcessRecord{
		{Component: "kube-proxy", PID: child.Process.Pid, Binary: bin},
		{Component: "etcd", PID: os.Getpid(), Binary: bin}, // a reused pid: not ours any more
	}}
	require.NoError(t, reg.Write(rec))
	require.NoError(t, sweep(reg, rec))
	assert.Error(t, <-exited, "the recorded process was killed")
	assert.NoDirExists(t, reg.ClusterDir("gone"))
}
