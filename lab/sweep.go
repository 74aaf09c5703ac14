//go:build linux

package lab

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// sweepNamespaces deletes every named namespace whose name starts with prefix.
func sweepNamespaces(prefix string) error {
	names, err := netns.List(prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, netns.Delete(n))
	}
	return errors.Join(errs...)
}

// sweepLab deletes the namespaces and the record of a lab whose owner is gone.
func sweepLab(reg Registry, name string) error {
	return errors.Join(sweepNamespaces(fmt.Sprintf("%s-%s-", netns.Prefix, name)), reg.Remove(name))
}

// DefaultGrace is how long a lab's live owner has to tear it down by itself after SIGTERM.
const DefaultGrace = 20 * time.Second

// DownOptions says how Down treats a lab whose owner process is still running.
type DownOptions struct {
	// Force stops live labs too: their owner gets SIGTERM (and SIGKILL after Grace), then
	// their namespaces are swept.
	Force bool
	// Grace is how long a signalled owner has to tear down by itself (default DefaultGrace).
	Grace time.Duration
}

// DownResult lists what Down did.
type DownResult struct {
	Removed []string // labs whose namespaces and records were removed
	Refused []string // live labs left alone (no Force)
	Orphans []string // namespaces with the kpb prefix that belonged to no lab or live test
}

// DownByName removes one lab. A lab whose owner is alive is asked to stop (SIGTERM) and
// given Grace to tear itself down; the rest is swept.
func DownByName(reg Registry, name string, o DownOptions) error {
	rec, err := reg.Read(name)
	if err != nil {
		return err
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if err := rec.StopOwner(o.Grace); err != nil {
		return fmt.Errorf("lab %w", err)
	}
	return sweepLab(reg, name)
}

// DownAll removes every lab whose owner is dead (or every lab, with Force), and every
// namespace with the kpb prefix that belongs to no live lab and no live test process.
func DownAll(reg Registry, o DownOptions) (DownResult, error) {
	var res DownResult
	var err error
	res.Removed, res.Refused, err = reg.Records().DownAll(o.Force, func(name string) error {
		return DownByName(reg, name, o)
	})
	errs := []error{err}
	all, err := netns.List(netns.Prefix)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	// Listed after the namespaces: a lab enters its registry in the index, and records
	// itself, before it creates its first namespace, so every lab of a listed namespace
	// has a registry in this list.
	regs := sweptRegistries(reg)
	for _, n := range all {
		if ownerOfNamespace(regs, n) {
			continue
		}
		res.Orphans = append(res.Orphans, n)
		errs = append(errs, netns.Delete(n))
	}
	return res, errors.Join(errs...)
}

// sweptRegistries returns the registries a sweep asks about a namespace's lab: reg, the
// default one and those of RegistryIndexDir, each once.
func sweptRegistries(reg Registry) []Registry {
	regs := []Registry{reg}
	for _, r := range append([]Registry{{Dir: DefaultRegistryDir}}, indexedRegistries()...) {
		if !slices.ContainsFunc(regs, func(o Registry) bool { return sameDir(o.Dir, r.Dir) }) {
			regs = append(regs, r)
		}
	}
	return regs
}

// sameDir reports whether two directory names name one directory.
func sameDir(a, b string) bool {
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}

// ownerOfNamespace reports whether a kpb namespace still has a live owner: a lab whose owner
// runs, registered in one of regs (its record read now, so a lab that stops during the
// sweep is not spared), or a test process (`kpbt<pid>-...`) that is still running.
func ownerOfNamespace(regs []Registry, name string) bool {
	if rest, ok := strings.CutPrefix(name, netns.TestPrefix); ok {
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		return err == nil && ProcessAlive(pid)
	}
	if rest, ok := strings.CutPrefix(name, netns.Prefix+"-"); ok {
		labName, _, _ := strings.Cut(rest, "-")
		for _, r := range regs {
			if rec, err := r.Read(labName); err == nil && rec.OwnerAlive() {
				return true
			}
		}
	}
	return false
}
