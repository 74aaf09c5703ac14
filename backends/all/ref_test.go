//go:build linux

package all

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/upstream"
)

// fakeKubeProxy writes an executable that answers --version like kube-proxy of version.
func fakeKubeProxy(t *testing.T, path, version string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\necho Kubernetes "+version+"\n"), 0o755))
}

func TestSplitAndReference(t *testing.T) {
	for _, ref := range []string{"iptables", "iptables@whole-table-cache", "kube-proxy-nftables@/a/b@c"} {
		name, variant := Split(ref)
		assert.Equal(t, ref, Reference(name, variant))
	}
	name, variant := Split("kube-proxy-nftables@v1.34.0")
	assert.Equal(t, "kube-proxy-nftables", name)
	assert.Equal(t, "v1.34.0", variant)
	assert.Equal(t, "kube-proxy-nftables@%2Fopt%2Fkp%2Fkube-proxy", FileName("kube-proxy-nftables@/opt/kp/kube-proxy"))
	assert.Equal(t, "iptables", FileName("iptables"))
}

// TestValidate: each kind of bad reference is refused before anything is built, with an
// error that says what exists.
func TestValidate(t *testing.T) {
	root := t.TempDir()
	t.Setenv(upstream.RootEnv, root)
	t.Setenv(upstream.DirEnv, "")
	fakeKubeProxy(t, filepath.Join(root, "v1.34.0", "bin", "kube-proxy"), "v1.34.0")
	bin := filepath.Join(t.TempDir(), "kube-proxy-a")
	fakeKubeProxy(t, bin, "v1.36.1")
	notExec := filepath.Join(t.TempDir(), "kube-proxy-b")
	require.NoError(t, os.WriteFile(notExec, []byte("x"), 0o644))

	tests := []struct {
		ref     string
		wantErr []string
	}{
		{ref: "iptables"},
		{ref: "kube-proxy-nftables"}, // whether built or not: New says
		{ref: "iptables@whole-table-cache"},
		{ref: "kube-proxy-nftables@v1.34.0"},
		{ref: "kube-proxy-ipvs@" + bin},
		{ref: "bogus", wantErr: []string{`unknown backend "bogus": allowed values are`, "iptables-legacy", "NAME@VARIANT for", "kube-proxy-*@vX.Y.Z"}},
		{ref: "bogus@v1.34.0", wantErr: []string{`unknown backend "bogus@v1.34.0"`}},
		{ref: "iptables@bogus", wantErr: []string{"want whole-table-cache"}},
		{ref: "nftables@v1.34.0", wantErr: []string{"nftables takes no @variant", "iptables@whole-table-cache"}},
		{ref: "kube-proxy-nftables@", wantErr: []string{"empty variant"}},
		{ref: "kube-proxy-nftables@v1.33.5", wantErr: []string{"kube-proxy v1.33.5:", "not found (built here: v1.34.0)"}},
		{ref: "kube-proxy-nftables@1.33", wantErr: []string{"want vMAJOR.MINOR.PATCH (built here: v1.34.0)"}},
		{ref: "kube-proxy-nftables@/nonexistent/kube-proxy", wantErr: []string{"no such file"}},
		{ref: "kube-proxy-nftables@" + notExec, wantErr: []string{"is not an executable file"}},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			err := Validate(tc.ref)
			assert.Equal(t, err == nil, Valid(tc.ref))
			if len(tc.wantErr) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.wantErr {
				assert.ErrorContains(t, err, w)
			}
			_, err = New(tc.ref, Node{Name: "node-0"}, Settings{})
			assert.Error(t, err, "New refuses it too")
		})
	}
}

// TestVariantsAreNamedByTheirReference: the full reference is the backend's name, so two
// variants of one backend are two backends in results; facts come from the base name.
func TestVariantsAreNamedByTheirReference(t *testing.T) {
	root := t.TempDir()
	t.Setenv(upstream.RootEnv, root)
	t.Setenv(upstream.DirEnv, "")
	fakeKubeProxy(t, filepath.Join(root, "v1.34.0", "bin", "kube-proxy"), "v1.34.0")
	old := filepath.Join(t.TempDir(), "kube-proxy")
	fakeKubeProxy(t, old, "v1.28.0")
	node := Node{Name: "node-0", StateDir: t.TempDir()}
	for _, ref := range []string{"iptables@whole-table-cache", "kube-proxy-nftables@v1.34.0", "kube-proxy-iptables@" + old} {
		t.Run(ref, func(t *testing.T) {
			b, err := New(ref, node, Settings{})
			require.NoError(t, err)
			assert.Equal(t, ref, b.Name())
			f, ok := Lookup(ref)
			require.True(t, ok)
			name, _ := Split(ref)
			assert.Equal(t, name, f.Name)
		})
	}
	// That old binary has no nftables mode: refused when built, not at its first sync.
	_, err := New("kube-proxy-nftables@"+old, node, Settings{})
	assert.ErrorContains(t, err, "kube-proxy v1.28.0 has no nftables mode")
}
