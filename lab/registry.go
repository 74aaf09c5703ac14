package lab

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/fsutil"
)

// DefaultRegistryDir is where every lab records itself: one JSON file per lab, written before
// the first namespace is created, so that `kpbench lab down --all` can always find and
// remove what a crashed run left.
const DefaultRegistryDir = "/run/kpbench/labs"

// The states of a registry entry: its owner is building it, it is ready, its owner is
// tearing it down.
const (
	StateBuilding = "building"
	StateReady    = "ready"
	StateStopping = "stopping"
)

// Entry is what every registry record starts with, a lab's as a `cluster up` stack's: what
// is registered, which process owns it (built it and tears it down), and its state.
type Entry struct {
	Name string `json:"name"`
	// PID is the owner process.
	PID int `json:"pid"`
	// State is StateBuilding, StateReady or StateStopping.
	State   string    `json:"state"`
	Created time.Time `json:"created"`
}

// OwnerAlive reports whether the process that owns the entry is still running.
func (e Entry) OwnerAlive() bool { return ProcessAlive(e.PID) }

// StopOwner asks a live owner other than this process to tear down what it owns (SIGTERM),
// waits up to grace for it to exit, then kills it. It does nothing when the owner is gone.
func (e Entry) StopOwner(grace time.Duration) error {
	if !e.OwnerAlive() || e.PID == os.Getpid() {
		return nil
	}
	if err := syscall.Kill(e.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: signal owner %d: %w", e.Name, e.PID, err)
	}
	deadline := time.Now().Add(grace)
	for ProcessAlive(e.PID) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // another process's exit: no event to wait for
	}
	if ProcessAlive(e.PID) {
		_ = syscall.Kill(e.PID, syscall.SIGKILL)
	}
	return nil
}

// ProcessAlive reports whether a process with this pid exists.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

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
	Entry
	// Hosts lists every namespace of the lab, fabric first.
	Hosts []HostRecord `json:"hosts"`
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

// Records is a directory of JSON records, one per name, each replaced atomically: the
// labs' (Registry) and the `cluster up` stacks' (kubestack.Registry) are kept this way.
type Records struct {
	// Dir is the directory.
	Dir string
	// Kind says what a record is about, in errors and hints: "lab", "cluster".
	Kind string
	// Layout is a record's path below Dir, with %s for its name: "%s.json",
	// "%s/cluster.json".
	Layout string
}

// ErrNotRegistered is wrapped by Read when a name has no record.
var ErrNotRegistered = errors.New("not registered")

// notRegistered says which name of which kind has no record, and where to look.
type notRegistered struct{ kind, name string }

func (e notRegistered) Error() string {
	return fmt.Sprintf("%s %q: no such %s (see `kpbench %s list`)", e.kind, e.name, e.kind, e.kind)
}

func (notRegistered) Is(target error) bool { return target == ErrNotRegistered }

// Path is the file of the named record.
func (r Records) Path(name string) string { return filepath.Join(r.Dir, fmt.Sprintf(r.Layout, name)) }

// Write stores rec as the named record, creating its directory.
func (r Records) Write(name string, rec any) error {
	path := r.Path(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("%s registry: %w", r.Kind, err)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("%s registry: encode %s: %w", r.Kind, name, err)
	}
	// A temporary file of its own per write: concurrent writers of one record (a lab's
	// kubelet and a scenario step both changing pods) must not rename each other's file.
	if err := fsutil.WriteFileAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("%s registry: %w", r.Kind, err)
	}
	return nil
}

// Read decodes the named record into rec (a pointer); ErrNotRegistered when there is none.
func (r Records) Read(name string, rec any) error {
	path := r.Path(name)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return notRegistered{r.Kind, name}
	}
	if err != nil {
		return fmt.Errorf("%s %q: %w", r.Kind, name, err)
	}
	if err := json.Unmarshal(data, rec); err != nil {
		return fmt.Errorf("%s %q: corrupt record %s: %w", r.Kind, name, path, err)
	}
	return nil
}

// ReadRecord reads the named record of recs as an R.
func ReadRecord[R any](recs Records, name string) (*R, error) {
	var rec R
	if err := recs.Read(name, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// List returns the names that have a record, sorted.
func (r Records) List() ([]string, error) {
	prefix, suffix, _ := strings.Cut(r.Layout, "%s")
	matches, err := filepath.Glob(filepath.Join(r.Dir, fmt.Sprintf(r.Layout, "*")))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(matches))
	for _, m := range matches {
		rel, err := filepath.Rel(r.Dir, m)
		if err != nil {
			return nil, err
		}
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(rel, prefix), suffix))
	}
	sort.Strings(names)
	return names, nil
}

// DownAll takes down, with down, every registered name whose owner is gone, or every one
// with force; it returns those it took down and the live ones it left alone.
func (r Records) DownAll(force bool, down func(name string) error) (removed, refused []string, err error) {
	names, err := r.List()
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, name := range names {
		var e Entry
		if err := r.Read(name, &e); err != nil {
			errs = append(errs, err)
			continue
		}
		if e.OwnerAlive() && !force {
			refused = append(refused, name)
			continue
		}
		if err := down(name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, refused, errors.Join(errs...)
}

// Registry is the directory of lab records, "<Dir>/<name>.json".
type Registry struct{ Dir string }

// Records is the registry's directory of records.
func (r Registry) Records() Records { return Records{Dir: r.Dir, Kind: "lab", Layout: "%s.json"} }

// StateDir is where the users of lab name keep its files (kube-proxy configurations and
// logs, certificates): a directory "state/<name>" beside the registry's. Removing the lab,
// by its owner or by a sweep after a crash, removes it too.
func (r Registry) StateDir(name string) string {
	return filepath.Join(filepath.Dir(r.Dir), "state", name)
}

// RegistryIndexDir lists every lab registry directory in use on this machine, one file per
// directory (named by a hash of its absolute path, holding the path). A registry enters it
// with its first record. A sweep reads it so that a lab registered elsewhere (another
// --registry, a test's temporary one) is not taken for an orphan because the swept registry
// does not know it.
const RegistryIndexDir = "/run/kpbench/registries"

// Write stores rec atomically, after entering the registry in RegistryIndexDir.
func (r Registry) Write(rec *Record) error {
	if err := r.enterIndex(); err != nil {
		return err
	}
	return r.Records().Write(rec.Name, rec)
}

// enterIndex writes the registry's entry in RegistryIndexDir unless it is there.
func (r Registry) enterIndex() error {
	dir, err := filepath.Abs(r.Dir)
	if err != nil {
		return fmt.Errorf("lab registry: %w", err)
	}
	entry := filepath.Join(RegistryIndexDir, fmt.Sprintf("%x", sha256.Sum256([]byte(dir))))
	if _, err := os.Stat(entry); err == nil {
		return nil
	}
	if err := os.MkdirAll(RegistryIndexDir, 0o755); err != nil {
		return fmt.Errorf("lab registry index: %w", err)
	}
	if err := fsutil.WriteFileAtomic(entry, []byte(dir), 0o644); err != nil {
		return fmt.Errorf("lab registry index: %w", err)
	}
	return nil
}

// indexedRegistries returns the registries RegistryIndexDir lists whose directory still
// exists; the entries of directories that are gone are removed.
func indexedRegistries() []Registry {
	entries, err := os.ReadDir(RegistryIndexDir)
	if err != nil {
		return nil
	}
	var regs []Registry
	for _, e := range entries {
		path := filepath.Join(RegistryIndexDir, e.Name())
		dir, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if _, err := os.Stat(string(dir)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(path)
			continue
		}
		regs = append(regs, Registry{Dir: string(dir)})
	}
	return regs
}

// Read loads the record of the named lab.
func (r Registry) Read(name string) (*Record, error) { return ReadRecord[Record](r.Records(), name) }

// Remove deletes the record of the named lab and its StateDir (absent is fine).
func (r Registry) Remove(name string) error {
	if err := os.RemoveAll(r.StateDir(name)); err != nil {
		return fmt.Errorf("lab registry: %w", err)
	}
	if err := os.Remove(r.Records().Path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lab registry: %w", err)
	}
	return nil
}

// List returns the names of all registered labs, sorted.
func (r Registry) List() ([]string, error) { return r.Records().List() }
