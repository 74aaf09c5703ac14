//go:build linux

package userspace

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRaiseOpenFiles: after raiseOpenFiles the soft limit is never lower than before, and
// as root it is past 20,000 (a node with 20,000 service ports needs that many listeners).
func TestRaiseOpenFiles(t *testing.T) {
	var before, after syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before))
	require.NoError(t, raiseOpenFiles())
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &after))
	assert.GreaterOrEqual(t, after.Cur, before.Cur)
	assert.GreaterOrEqual(t, after.Max, before.Max)
	if os.Geteuid() == 0 {
		assert.Greater(t, after.Cur, uint64(20000), "root must get past a 20,000 limit")
	}
}
