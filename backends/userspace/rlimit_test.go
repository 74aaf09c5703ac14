//go:build linux

package userspace

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
)

// TestRaiseOpenFiles: after raiseOpenFiles the soft limit is never lower than before, and
// reaches what the proxy wants or the hard limit (20,000 service ports need that many
// listeners).
func TestRaiseOpenFiles(t *testing.T) {
	var before, after syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before))
	require.NoError(t, raiseOpenFiles())
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &after))
	assert.GreaterOrEqual(t, after.Cur, before.Cur)
	assert.GreaterOrEqual(t, after.Max, before.Max)
	// Either the limit went up to what the proxy wants, or (without CAP_SYS_RESOURCE, as
	// in some sandboxes) the soft limit went up to the hard one.
	if after.Cur < wantOpenFiles {
		assert.Equal(t, after.Max, after.Cur, "the soft limit stayed below the hard one")
	}
}

// TestCheckDescriptors: listeners that fit under the open-file limit pass; more than the
// limit can hold is refused as a machine limit, naming the limit.
func TestCheckDescriptors(t *testing.T) {
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	require.NoError(t, checkDescriptors(0))
	require.NoError(t, checkDescriptors(10))
	err := checkDescriptors(int(min(lim.Cur, 1<<30)))
	require.ErrorIs(t, err, backends.ErrMachineLimit)
	assert.Contains(t, err.Error(), "limit of")
}
