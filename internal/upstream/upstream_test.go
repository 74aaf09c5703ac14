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
	assert.Equal(t, "/var/cache/kpbench/upstream/"+KubernetesVersion+"/bin", BinDir())
}
