package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegistryRemoveTakesStateDir: removing a lab's record removes the files its users
// kept in its state directory, so nothing of a swept lab stays behind.
func TestRegistryRemoveTakesStateDir(t *testing.T) {
	reg := Registry{Dir: filepath.Join(t.TempDir(), "labs")}
	require.NoError(t, reg.Write(&Record{Name: "x1"}))
	dir := reg.StateDir("x1")
	assert.Equal(t, filepath.Join(filepath.Dir(reg.Dir), "state", "x1"), dir)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-proxy-node-0.log"), []byte("x"), 0o644))

	require.NoError(t, reg.Remove("x1"))
	assert.NoDirExists(t, dir)
	assert.NoFileExists(t, reg.path("x1"))
	require.NoError(t, reg.Remove("x1"), "removing twice is fine")
}
