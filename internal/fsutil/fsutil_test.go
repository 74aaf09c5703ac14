package fsutil

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	require.NoError(t, WriteFileAtomic(path, []byte("one"), 0o600))
	require.NoError(t, WriteFileAtomic(path, []byte("two"), 0o644))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two", string(data))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
	assert.Error(t, WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil, 0o644), "a missing directory is an error")
}

// TestLockExcludes: a second Lock waits while the first is held, and ends with its context.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	unlock, err := Lock(context.Background(), path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = Lock(ctx, path)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "held by the first")
	unlock()
	unlock2, err := Lock(context.Background(), path)
	require.NoError(t, err, "free after unlock")
	unlock2()
}
