package toolroot

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in       string
		want     Spec
		wantID   string
		wantRoot string // relative to the cache, "/" for the host
		wantErr  string
	}{
		{"host", Host, "host", "/", ""},
		{"", Host, "host", "/", ""},
		{"debian:trixie", Spec{"debian", "trixie"}, "debian-trixie", "debian-trixie/root", ""},
		{"debian:bookworm-backports", Spec{"debian", "bookworm-backports"}, "debian-bookworm-backports", "debian-bookworm-backports/root", ""},
		{" debian:sid ", Spec{"debian", "sid"}, "debian-sid", "debian-sid/root", ""},
		{"trixie", Spec{}, "", "", "want \"host\" or DISTRO:SUITE"},
		{"ubuntu:noble", Spec{}, "", "", "unknown distribution \"ubuntu\" (known: debian)"},
		{"debian:", Spec{}, "", "", "suite \"\""},
		{"debian:Trixie", Spec{}, "", "", "suite \"Trixie\""},
		{"debian:../etc", Spec{}, "", "", "suite \"../etc\""},
		{"debian:trixie/x", Spec{}, "", "", "suite"},
		{"debian:a b", Spec{}, "", "", "suite"},
	}
	cache := Cache{Dir: "/c"}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantID, got.ID())
			if tt.wantRoot == "/" {
				assert.Equal(t, "/", cache.RootDir(got))
			} else {
				assert.Equal(t, "/c/"+tt.wantRoot, cache.RootDir(got))
			}
			again, err := Parse(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, again, "String is what Parse reads")
		})
	}
}

func TestDefaultCacheLayout(t *testing.T) {
	s := Spec{"debian", "trixie"}
	assert.Equal(t, "/var/cache/kpbench/tools/debian-trixie/root", Cache{}.RootDir(s), "the contract with the backends")
	assert.Equal(t, "/var/cache/kpbench/tools/debian-trixie", Cache{}.EntryDir(s))
	assert.Equal(t, []string{"nftables", "iptables", "ipset", "conntrack", "ipvsadm"}, Packages())
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	c := Cache{Dir: dir}
	trixie := Spec{"debian", "trixie"}

	r, err := c.Resolve(Host)
	require.NoError(t, err)
	assert.Equal(t, "/", r.Dir)
	assert.Equal(t, "", r.ChrootDir(), "host tools run from PATH, no chroot")

	_, err = c.Resolve(trixie)
	require.ErrorIs(t, err, ErrNotPrepared)
	assert.ErrorContains(t, err, "run: kpbench tools prepare debian:trixie --cache-dir "+dir)
	_, err = Cache{}.Resolve(Spec{"debian", "kpbench-test-absent"})
	assert.ErrorContains(t, err, "run: kpbench tools prepare debian:kpbench-test-absent")
	assert.NotContains(t, err.Error(), "--cache-dir")

	writeEntry(t, c, trixie, true)
	r, err = c.Resolve(trixie)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "debian-trixie", "root"), r.Dir)
	assert.Equal(t, r.Dir, r.ChrootDir())
	assert.Equal(t, "nftables v1.1.3 (Commodore Bullmoose #4)", r.Info.Versions.Get("nft"))
	assert.Equal(t, "ipvsadm 1:1.31-4 (dpkg)", r.Info.Versions.Get("ipvsadm"), "a tool that could not print its version")

	// info.json without its root is not a root.
	require.NoError(t, os.RemoveAll(c.RootDir(trixie)))
	_, err = c.Resolve(trixie)
	require.ErrorIs(t, err, ErrNotPrepared)
}

// writeEntry makes a prepared-looking entry of s in c, with a root when withRoot.
func writeEntry(t *testing.T, c Cache, s Spec, withRoot bool) {
	t.Helper()
	if withRoot {
		require.NoError(t, os.MkdirAll(filepath.Join(c.RootDir(s), "usr/sbin"), 0o755))
	} else {
		require.NoError(t, os.MkdirAll(c.EntryDir(s), 0o755))
	}
	info := Info{Spec: s.String(), Versions: Versions{
		{Tool: "nft", Version: "nftables v1.1.3 (Commodore Bullmoose #4)", Package: "nftables", PackageVersion: "1.1.3-1"},
		{Tool: "ipvsadm", Error: "ipvsadm: exit status 2", Package: "ipvsadm", PackageVersion: "1:1.31-4"},
	}}
	b, err := json.Marshal(info)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.EntryDir(s), infoName), b, 0o644))
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	c := Cache{Dir: dir}
	got, err := Cache{Dir: filepath.Join(dir, "absent")}.List()
	require.NoError(t, err)
	assert.Empty(t, got, "no cache directory: nothing prepared")

	writeEntry(t, c, Spec{"debian", "trixie"}, true)
	writeEntry(t, c, Spec{"debian", "bookworm"}, true)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".tmp-debian-sid-123", "root"), 0o755)) // a build in progress
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "stray"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".lock-debian-trixie"), nil, 0o644))
	got, err = c.List()
	require.NoError(t, err)
	var specs []string
	for _, r := range got {
		specs = append(specs, r.Spec.String())
	}
	assert.Equal(t, []string{"debian:bookworm", "debian:trixie"}, specs)

	// An info.json in the wrong directory is an error, not a silently wrong root.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "debian-sid"), 0o755))
	b, _ := json.Marshal(Info{Spec: "debian:trixie"})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "debian-sid", infoName), b, 0o644))
	_, err = c.List()
	assert.ErrorContains(t, err, "does not match the directory")
}

// fakeBuild is a PrepareOptions.run that makes a root with an nft, counting the builds.
type fakeBuild struct {
	builds atomic.Int32
	fail   error
	argv   [][]string
	mu     sync.Mutex
	gate   chan struct{} // when set, a build waits for it
}

func (f *fakeBuild) run(_ context.Context, argv []string, _ io.Writer) error {
	f.builds.Add(1)
	f.mu.Lock()
	f.argv = append(f.argv, argv)
	f.mu.Unlock()
	if f.gate != nil {
		<-f.gate
	}
	dir := argv[len(argv)-2] // mmdebstrap ... SUITE DIR SOURCE
	if err := os.MkdirAll(filepath.Join(dir, "usr/sbin"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/sbin/nft"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		return err
	}
	return f.fail
}

func fakeVersions(_ context.Context, dir string) (Versions, error) {
	if _, err := os.Stat(filepath.Join(dir, "usr/sbin/nft")); err != nil {
		return nil, err
	}
	return Versions{{Tool: "nft", Version: "nftables v1.1.3 (fake)"}}, nil
}

func TestPrepareFake(t *testing.T) {
	dir := t.TempDir()
	c := Cache{Dir: dir}
	trixie := Spec{"debian", "trixie"}
	f := &fakeBuild{}
	opts := PrepareOptions{run: f.run, readVersions: fakeVersions, Mirror: "http://mirror.example/debian"}

	// A stale build of a crashed builder is cleaned up.
	stale := filepath.Join(dir, ".tmp-debian-trixie-999")
	require.NoError(t, os.MkdirAll(filepath.Join(stale, "root", "usr"), 0o755))

	r, err := c.Prepare(context.Background(), trixie, opts)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "debian-trixie", "root"), r.Dir)
	assert.Equal(t, "nftables v1.1.3 (fake)", r.Info.Versions.Get("nft"))
	assert.Equal(t, "http://mirror.example/debian", r.Info.Mirror)
	assert.Equal(t, []string{"mmdebstrap", "--variant=essential", "--include=nftables,iptables,ipset,conntrack,ipvsadm",
		"trixie", r.Dir, "deb http://mirror.example/debian trixie main"}, r.Info.Command)
	assert.NoDirExists(t, stale)
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	assert.Empty(t, leftovers)

	// Prepared: the second call builds nothing.
	_, err = c.Prepare(context.Background(), trixie, opts)
	require.NoError(t, err)
	assert.Equal(t, int32(1), f.builds.Load())

	// The host is a no-op.
	r, err = c.Prepare(context.Background(), Host, opts)
	require.NoError(t, err)
	assert.Equal(t, "/", r.Dir)
	assert.Equal(t, int32(1), f.builds.Load())
}

func TestPrepareFailureLeavesNothing(t *testing.T) {
	tests := []struct {
		name     string
		fail     error
		versions func(context.Context, string) (Versions, error)
		wantErr  string
	}{
		{"builder fails", errors.New("mmdebstrap: exit status 1"), fakeVersions, "build: mmdebstrap: exit status 1"},
		{"root does not work", nil, func(context.Context, string) (Versions, error) {
			return nil, errors.New("no usable nft")
		}, "the built root does not work: no usable nft"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := Cache{Dir: dir}
			f := &fakeBuild{fail: tt.fail}
			_, err := c.Prepare(context.Background(), Spec{"debian", "trixie"}, PrepareOptions{run: f.run, readVersions: tt.versions, Mirror: "http://m/debian"})
			require.ErrorContains(t, err, tt.wantErr)
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				assert.True(t, strings.HasPrefix(e.Name(), ".lock-"), "only the lock file may remain: %s", e.Name())
			}
			_, err = c.Resolve(Spec{"debian", "trixie"})
			assert.ErrorIs(t, err, ErrNotPrepared)
		})
	}
}

// TestPrepareConcurrent starts three builders of the same root at once: one builds, the
// others wait for the lock and reuse its root.
func TestPrepareConcurrent(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	f := &fakeBuild{gate: make(chan struct{})}
	opts := PrepareOptions{run: f.run, readVersions: fakeVersions, Mirror: "http://m/debian"}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Prepare(context.Background(), Spec{"debian", "trixie"}, opts)
		}()
	}
	close(f.gate)
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, int32(1), f.builds.Load(), "one build for three callers")
}

func TestPrepareInVM(t *testing.T) {
	t.Setenv(EnvInVM, "1")
	_, err := Cache{Dir: t.TempDir()}.Prepare(context.Background(), Spec{"debian", "trixie"}, PrepareOptions{})
	assert.ErrorContains(t, err, "on the host, not in the microVM")
}

func TestParseDpkgStatus(t *testing.T) {
	status := `Package: nftables
Status: install ok installed
Priority: important
Version: 1.1.3-1
Description: Program to control packet filtering rules by Netfilter project
 This software provides an in-kernel packet classification framework.
 .
 Version: not a field

Package: ipvsadm
Status: deinstall ok config-files
Version: 1:1.31-4

Package: iptables
Version: 1.8.11-2
Status: install ok installed
`
	got, err := parseDpkgStatus(strings.NewReader(status))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"nftables": "1.1.3-1", "iptables": "1.8.11-2"}, got)
}

func TestHostMirror(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"deb822 as on the bench machine", map[string]string{
			"sources.list.d/debian.sources": "Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n",
			"sources.list.d/google.list":    "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n",
		}, "http://deb.debian.org/debian"},
		{"one-line with options", map[string]string{
			"sources.list": "# comment\ndeb-src http://src.example/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main\n",
		}, "http://mirror.example/debian"},
		{"security only", map[string]string{
			"sources.list": "deb http://security.debian.org/debian-security bookworm-security main\n",
		}, DefaultMirror},
		{"disabled stanza", map[string]string{
			"sources.list.d/a.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n",
		}, DefaultMirror},
		{"nothing", nil, DefaultMirror},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755))
			for name, content := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			}
			assert.Equal(t, tt.want, hostMirror(dir))
		})
	}
}

func TestReadVersionsNoNft(t *testing.T) {
	_, err := ReadVersions(context.Background(), t.TempDir())
	assert.ErrorContains(t, err, "no usable nft")
}
