package lab

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegistryRemoveTakesStateDir: removing a lab's record removes the files its users
// kept in its state directory, so nothing of a swept lab stays behind.
func TestRegistryRemoveTakesStateDir(t *testing.T) {
	reg := Registry{Dir: filepath.Join(t.TempDir(), "labs")}
	require.NoError(t, reg.Write(&Record{Entry: Entry{Name: "x1"}}))
	dir := reg.StateDir("x1")
	assert.Equal(t, filepath.Join(filepath.Dir(reg.Dir), "state", "x1"), dir)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-proxy-node-0.log"), []byte("x"), 0o644))

	require.NoError(t, reg.Remove("x1"))
	assert.NoDirExists(t, dir)
	assert.NoFileExists(t, reg.Records().Path("x1"))
	require.NoError(t, reg.Remove("x1"), "removing twice is fine")
}

// TestRecordsLayouts: a registry finds its records by its layout, a file per name or a
// directory per name, and says which name it does not know.
func TestRecordsLayouts(t *testing.T) {
	for _, layout := range []string{"%s.json", "%s/cluster.json"} {
		t.Run(layout, func(t *testing.T) {
			recs := Records{Dir: t.TempDir(), Kind: "thing", Layout: layout}
			for _, name := range []string{"b", "a"} {
				require.NoError(t, recs.Write(name, &Entry{Name: name, State: StateReady}))
			}
			require.NoError(t, os.WriteFile(filepath.Join(recs.Dir, "a.log"), []byte("x"), 0o644))
			names, err := recs.List()
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "b"}, names)
			var e Entry
			require.NoError(t, recs.Read("b", &e))
			assert.Equal(t, Entry{Name: "b", State: StateReady}, e)
			err = recs.Read("c", &e)
			assert.ErrorIs(t, err, ErrNotRegistered)
			assert.EqualError(t, err, "thing \"c\": no such thing (see `kpbench thing list`)")
		})
	}
}

// TestRecordsDownAll: without force only entries whose owner is gone are taken down; with
// force every one is, and a failure to take one down is reported without stopping the rest.
func TestRecordsDownAll(t *testing.T) {
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	recs := Records{Dir: t.TempDir(), Kind: "lab", Layout: "%s.json"}
	require.NoError(t, recs.Write("gone", &Entry{Name: "gone", PID: dead.Process.Pid}))
	require.NoError(t, recs.Write("live", &Entry{Name: "live", PID: os.Getpid()}))
	require.NoError(t, recs.Write("stuck", &Entry{Name: "stuck", PID: dead.Process.Pid}))
	for _, tt := range []struct {
		force            bool
		removed, refused []string
	}{
		{false, []string{"gone"}, []string{"live"}},
		{true, []string{"gone", "live"}, nil},
	} {
		var downed []string
		removed, refused, err := recs.DownAll(tt.force, func(name string) error {
			if name == "stuck" {
				return errors.New("stuck: busy")
			}
			downed = append(downed, name)
			return nil
		})
		assert.EqualError(t, err, "stuck: busy", "force %v", tt.force)
		assert.Equal(t, tt.removed, removed, "force %v", tt.force)
		assert.Equal(t, tt.removed, downed, "force %v", tt.force)
		assert.Equal(t, tt.refused, refused, "force %v", tt.force)
	}
}
