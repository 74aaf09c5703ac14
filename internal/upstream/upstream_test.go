package upstream

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBinary(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, Etcd), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, KubeProxy), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, KubeAPIServer), 0o755))

	tests := []struct {
		name    string
		wantErr string
	}{
		{name: Etcd},
		{name: KubeProxy, wantErr: "not an executable file: run `make upstream`"},
		{name: KubeAPIServer, wantErr: "not an executable file"},
		{name: KubeScheduler, wantErr: "not found: run `make upstream`"},
		{name: CoreDNS, wantErr: "not found: run `make upstream`"},
		{name: E2ETest, wantErr: "not found: run `make e2e-build`"},
		{name: "kubelet", wantErr: "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Binary(tc.name)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(dir, tc.name), p)
		})
	}

	t.Setenv(DirEnv, filepath.Join(dir, "absent"))
	_, err := Binary(KubeProxy)
	assert.ErrorContains(t, err, "run `make upstream`")
}

func TestBinDirDefault(t *testing.T) {
	t.Setenv(DirEnv, "")
	t.Setenv(RootEnv, "")
	assert.Equal(t, "/var/cache/kpbench/upstream/"+KubernetesVersion+"/bin", BinDir())
}

// TestKubeProxyOf: the bare version is make upstream's; another version is looked up in
// its own directory; a malformed or missing one is an error listing what is built.
func TestKubeProxyOf(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RootEnv, root)
	t.Setenv(DirEnv, "")
	mk := func(version string, mode os.FileMode) {
		dir := filepath.Join(root, version, "bin")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, KubeProxy), []byte("#!/bin/sh\n"), mode))
	}
	mk(KubernetesVersion, 0o755)
	mk("v1.34.0", 0o755)
	mk("v1.34.0-rc.1", 0o755)
	mk("v1.33.5", 0o644) // not executable: not built
	require.NoError(t, os.MkdirAll(filepath.Join(root, "notes"), 0o755))

	assert.Equal(t, []string{"v1.34.0-rc.1", "v1.34.0", KubernetesVersion}, Versions())
	tests := []struct {
		version, want, wantErr string
	}{
		{version: "", want: filepath.Join(root, KubernetesVersion, "bin", KubeProxy)},
		{version: KubernetesVersion, want: filepath.Join(root, KubernetesVersion, "bin", KubeProxy)},
		{version: "v1.34.0", want: filepath.Join(root, "v1.34.0", "bin", KubeProxy)},
		{version: "v1.33.5", wantErr: "not an executable file"},
		{version: "v1.32.0", wantErr: "not found (built here: v1.34.0-rc.1, v1.34.0, " + KubernetesVersion + ")"},
		{version: "1.34", wantErr: `kube-proxy version "1.34": want vMAJOR.MINOR.PATCH (built here: v1.34.0-rc.1`},
		{version: "../v1.34.0", wantErr: "want vMAJOR.MINOR.PATCH"},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			p, err := KubeProxyOf(tc.version)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, p)
		})
	}

	t.Setenv(RootEnv, filepath.Join(root, "absent"))
	_, err := KubeProxyOf("v1.34.0")
	assert.ErrorContains(t, err, "built here: none: run `make upstream`")
}

func TestCompareVersions(t *testing.T) {
	assert.Negative(t, CompareVersions("v1.9.0", "v1.10.0"))
	assert.Negative(t, CompareVersions("v1.34.0-rc.1", "v1.34.0"))
	assert.Positive(t, CompareVersions("v1.37.2", "v1.34.0"))
	assert.Zero(t, CompareVersions("v1.34.0", "v1.34.0"))
}
