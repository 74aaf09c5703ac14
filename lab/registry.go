package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/fsutil"
)

// DefaultRegistryDir is where every lab records itself: one JSON file per lab, written before
// the first namespace is created, so that `kpbench lab down --all` can always find and
// remove what a crashed run left.
const DefaultRegistryDir = "/run/kpbench/labs"

// HostKind is what a lab host plays: a node, a pod or an external client.
type HostKind string

// The kinds of lab host.
const (
	KindFabric HostKind = "fabric"
	KindNode   HostKind = "node"
	KindPod    HostKind = "pod"
	KindClient HostKind = "client"
)

// HostRecord is one host of a lab as `lab status` shows it.
type HostRecord struct {
	Name  string   `json:"name"`
	Kind  HostKind `json:"kind"`
	NetNS string   `json:"netns"`
	IP    string   `json:"ip,omitempty"`
	// Node hosting a pod; PodCIDR of a node.
	Node    string `json:"node,omitempty"`
	PodCIDR string `json:"podCIDR,omitempty"`
	Zone    string `json:"zone,omitempty"`
	// Ready and Terminating are a pod's conditions as the lab's kubelet reports them.
	Ready       bool     `json:"ready"`
	Terminating bool     `json:"terminating,omitempty"`
	Ports       []string `json:"ports,omitempty"`
}

// Record is the registry entry of one lab.
type Record struct {
	Name    string    `json:"name"`
	PID     int       `json:"pid"`
	State   string    `json:"state"` // "building", "ready", "stopping"
	Created time.Time `json:"created"`
	// Hosts lists every namespace of the lab, fabric first.
	Hosts []HostRecord `json:"hosts"`
}

// Registry is the directory of lab records.
type Registry struct{ Dir string }

func (r Registry) path(name string) string { return filepath.Join(r.Dir, name+".json") }

// StateDir is where the users of lab name keep its files (kube-proxy configurations and
// logs, certificates): a directory "state/<name>" beside the registry's. Removing the lab,
// by its owner or by a sweep after a crash, removes it too.
func (r Registry) StateDir(name string) string {
	return filepath.Join(filepath.Dir(r.Dir), "state", name)
}

// Write stores rec atomically.
func (r Registry) Write(rec *Record) error {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("registry: encode %s: %w", rec.Name, err)
	}
	// A temporary file of its own per write: concurrent writers of one lab's record (the
	// kubelet and a scenario step both changing pods) must not rename each other's file.
	if err := fsutil.WriteFileAtomic(r.path(rec.Name), data, 0o644); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// ErrNoLab is returned when a lab is not in the registry.
var ErrNoLab = errors.New("no such lab")

// Read loads the record of the named lab.
func (r Registry) Read(name string) (*Record, error) {
	data, err := os.ReadFile(r.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lab %q: %w (see `kpbench lab list`)", name, ErrNoLab)
	}
	if err != nil {
		return nil, fmt.Errorf("lab %q: %w", name, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("lab %q: corrupt registry file %s: %w", name, r.path(name), err)
	}
	return &rec, nil
}

// Remove deletes the record of the named lab and its StateDir (absent is fine).
func (r Registry) Remove(name string) error {
	if err := os.RemoveAll(r.StateDir(name)); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	if err := os.Remove(r.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// List returns the names of all registered labs, sorted.
func (r Registry) List() ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(r.Dir, "*.json"))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(matches))
	for _, m := range matches {
		names = append(names, filepath.Base(m[:len(m)-len(".json")]))
	}
	sort.Strings(names)
	return names, nil
}

// Host returns the host record with the given name.
func (rec *Record) Host(name string) (HostRecord, bool) {
	for _, h := range rec.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return HostRecord{}, false
}

// OwnerAlive reports whether the process that built the lab is still running.
func (rec *Record) OwnerAlive() bool { return ProcessAlive(rec.PID) }

// ProcessAlive reports whether a process with this pid exists.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
