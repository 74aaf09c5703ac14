package proc

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func start(t *testing.T, script string) (*Process, chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	require.NoError(t, cmd.Start())
	after := make(chan struct{})
	return Watch(cmd, func() { close(after) }), after
}

func TestStopTerminates(t *testing.T) {
	p, after := start(t, "sleep 60")
	done, _ := p.Exited()
	assert.False(t, done)
	require.NoError(t, p.Stop(context.Background(), 10*time.Second))
	done, err := p.Exited()
	assert.True(t, done)
	assert.Error(t, err, "killed by SIGTERM")
	<-after
}

func TestStopKillsAfterGrace(t *testing.T) {
	p, _ := start(t, "trap '' TERM; exec sleep 60")
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	start := time.Now()
	require.NoError(t, p.Stop(context.Background(), 200*time.Millisecond))
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	<-p.Done()
}

func TestStopExited(t *testing.T) {
	p, _ := start(t, "exit 0")
	<-p.Done()
	done, err := p.Exited()
	assert.True(t, done)
	assert.NoError(t, err)
	assert.NoError(t, p.Stop(context.Background(), time.Second))
}
