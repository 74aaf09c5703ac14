//go:build linux

package kubestack

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"kpbench.dev/kpbench/lab"
)

// DownResult lists what DownAll did.
type DownResult struct {
	Removed []string // clusters removed
	Refused []string // live clusters left alone (no force)
}

// DefaultGrace is how long a cluster's owner has to tear down by itself after SIGTERM
// (kube-proxies and control-plane components get 10 s each to stop).
const DefaultGrace = 60 * time.Second

// DownByName removes one cluster. A live owner (another process) gets SIGTERM and grace
// (default DefaultGrace) to tear the cluster down itself, then SIGKILL; whatever is left is
// swept (see sweep), and the log of a detached owner goes too.
func DownByName(reg Registry, name string, grace time.Duration) error {
	rec, err := reg.Read(name)
	if err != nil {
		return err
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	err = errors.Join(rec.StopOwner(grace), sweep(reg, rec))
	if rec.Log != "" {
		if rerr := os.Remove(rec.Log); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// DownAll removes every cluster whose owner is gone, or every cluster with force.
func DownAll(reg Registry, force bool, grace time.Duration) (DownResult, error) {
	var res DownResult
	var err error
	res.Removed, res.Refused, err = reg.Records().DownAll(force, func(name string) error {
		return DownByName(reg, name, grace)
	})
	return res, err
}

// sweep removes what a cluster whose owner is gone left: its processes that still run
// their recorded binary (the owner's death normally took them along: they are started
// with a parent-death signal), then its lab (the lab's sweep: namespaces, record, state),
// then the cluster's directory.
func sweep(reg Registry, rec *Record) error {
	var errs []error
	for _, p := range rec.Processes {
		if runs(p.PID, p.Binary) {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("kill %s (pid %d): %w", p.Component, p.PID, err))
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range rec.Processes {
		for runs(p.PID, p.Binary) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // another process's exit: no event to wait for
		}
	}
	if err := lab.DownByName(reg.Labs, rec.Name, lab.DownOptions{}); err != nil && !errors.Is(err, lab.ErrNotRegistered) {
		errs = append(errs, err)
	}
	errs = append(errs, reg.Remove(rec.Name))
	return errors.Join(errs...)
}
