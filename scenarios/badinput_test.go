package scenarios

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReferencedFileNotOurs: a scenario that names a file that is not kpbench's (a
// passwd file as its proxy configuration or manifest) gets an error at its own field
// that names the file, and the file's content is not echoed back.
func TestReferencedFileNotOurs(t *testing.T) {
	dir := t.TempDir()
	const secret = "root:x:0:0:root:/root:/bin/bash"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "passwd"), []byte(secret+"\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty.yaml"), []byte("# nothing yet\n"), 0o644))
	head := "apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: t\n"
	for _, tc := range []struct {
		name, src, field, msg string
		line                  int
	}{
		{"proxy configuration", head + "proxy:\n  proxyConfigFile: passwd\nsteps:\n- wait: {synced: true}\n", "proxy.proxyConfigFile", "passwd:1: the document is a string, not a mapping", 5},
		{"empty proxy configuration", head + "proxy:\n  proxyConfigFile: empty.yaml\nsteps:\n- wait: {synced: true}\n", "proxy.proxyConfigFile", "empty.yaml:1: empty file", 5},
		{"manifest", head + "manifests:\n- file: passwd\nsteps:\n- wait: {synced: true}\n", "manifests[0].file", "passwd:1: a manifest must be a mapping with apiVersion and kind, not a string", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, "s.yaml")
			_, err := ParseScenario(file, []byte(tc.src), dir)
			requirePositioned(t, err, file, tc.line, tc.field, tc.msg)
			assert.NotContains(t, err.Error(), "root:x", "the file's content is not echoed")
			assert.NotContains(t, err.Error(), "<nil>")
		})
	}
	t.Run("scenario file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "passwd"))
		requirePositioned(t, err, filepath.Join(dir, "passwd"), 1, "", "the document is a string, not a mapping")
		assert.NotContains(t, err.Error(), "root:x")
	})
}
