package toolroot

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultCacheDir holds the prepared roots.
const DefaultCacheDir = "/var/cache/kpbench/tools"

// Names inside a cache entry.
const (
	rootName = "root"
	infoName = "info.json"
)

// Cache is a directory of prepared roots. The zero value uses DefaultCacheDir.
type Cache struct {
	// Dir is the cache directory ("" means DefaultCacheDir).
	Dir string
}

// dir returns the cache directory.
func (c Cache) dir() string {
	if c.Dir == "" {
		return DefaultCacheDir
	}
	return c.Dir
}

// EntryDir is where the root of s lives with its info.json: <cache>/<id>.
func (c Cache) EntryDir(s Spec) string { return filepath.Join(c.dir(), s.ID()) }

// RootDir is the root directory of s, "/" for the host: <cache>/<id>/root.
func (c Cache) RootDir(s Spec) string {
	if s.IsHost() {
		return "/"
	}
	return filepath.Join(c.EntryDir(s), rootName)
}

// Info is a prepared root's info.json: how and when it was built, and its tools.
type Info struct {
	// Spec is the --tools value of the root ("debian:trixie").
	Spec string `json:"spec"`
	// Mirror is the Debian mirror the packages came from.
	Mirror string `json:"mirror,omitempty"`
	// Command is the command line that built the root.
	Command []string `json:"command,omitempty"`
	// Prepared is when the build finished; Took how long it took (JSON: nanoseconds).
	Prepared time.Time     `json:"prepared"`
	Took     time.Duration `json:"took"`
	// Bytes is the size of the root's files.
	Bytes int64 `json:"bytes"`
	// Versions are the root's tools, as ReadVersions found them after the build.
	Versions Versions `json:"versions"`
}

// Root is a set of tools ready to run.
type Root struct {
	// Spec names it.
	Spec Spec
	// Dir is the root directory: "/" for the host.
	Dir string
	// Info describes a prepared root (zero for the host).
	Info Info
}

// ChrootDir is the directory to chroot into before running a tool: "" for the host (run
// the tools from PATH), else Dir.
func (r Root) ChrootDir() string {
	if r.Spec.IsHost() {
		return ""
	}
	return r.Dir
}

// ErrNotPrepared is wrapped by Resolve's error for a root that is not in the cache.
var ErrNotPrepared = errors.New("tools not prepared")

// Resolve returns the root of s: the host's, or the prepared one in the cache. A root that
// is not prepared is an error naming the command that prepares it.
func (c Cache) Resolve(s Spec) (Root, error) {
	if s.IsHost() {
		return Root{Spec: s, Dir: "/"}, nil
	}
	info, err := c.readInfo(s)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			prep := "kpbench tools prepare " + s.String()
			if c.Dir != "" && c.Dir != DefaultCacheDir {
				prep += " --cache-dir " + c.Dir
			}
			return Root{}, fmt.Errorf("tools %s: %w (no %s); run: %s", s, ErrNotPrepared, c.RootDir(s), prep)
		}
		return Root{}, fmt.Errorf("tools %s: %w", s, err)
	}
	return Root{Spec: s, Dir: c.RootDir(s), Info: info}, nil
}

// readInfo reads the info.json of s, checking that its root is there.
func (c Cache) readInfo(s Spec) (Info, error) {
	b, err := os.ReadFile(filepath.Join(c.EntryDir(s), infoName))
	if err != nil {
		return Info{}, err
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("%s: %w", filepath.Join(c.EntryDir(s), infoName), err)
	}
	if st, err := os.Stat(c.RootDir(s)); err != nil || !st.IsDir() {
		return Info{}, fmt.Errorf("%s: %w", c.RootDir(s), os.ErrNotExist)
	}
	return info, nil
}

// List returns the prepared roots of the cache, sorted by spec. Entries that are not roots
// (builds in progress, stray files) are left out; an entry whose info.json is unreadable is
// an error.
func (c Cache) List() ([]Root, error) {
	entries, err := os.ReadDir(c.dir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tools cache: %w", err)
	}
	var out []Root
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.dir(), e.Name(), infoName))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tools cache: %w", err)
		}
		var info Info
		if err := json.Unmarshal(b, &info); err != nil {
			return nil, fmt.Errorf("tools cache %s: %w", filepath.Join(c.dir(), e.Name(), infoName), err)
		}
		s, err := Parse(info.Spec)
		if err != nil || s.ID() != e.Name() {
			return nil, fmt.Errorf("tools cache %s: spec %q does not match the directory", filepath.Join(c.dir(), e.Name()), info.Spec)
		}
		out = append(out, Root{Spec: s, Dir: c.RootDir(s), Info: info})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.String() < out[j].Spec.String() })
	return out, nil
}
