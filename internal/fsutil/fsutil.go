// Package fsutil holds the two file-system habits kpbench's caches, registries and result
// writers share: write a file so that no reader ever sees half of it, and take a lock that
// serialises builders of one cache entry across processes.
package fsutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// WriteFileAtomic writes data to path through a temporary file of its own in the same
// directory and a rename, with the given permissions: a reader sees the old file or the
// new one, never a part, and concurrent writers of one path do not rename each other's
// temporary file. The directory must exist.
//
// Equivalent to: `cat > path.XXXX.tmp && chmod perm path.XXXX.tmp && mv path.XXXX.tmp path`.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Chmod(perm), f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Lock takes an exclusive flock on path (created if absent), waiting while another process
// holds it, until ctx ends. unlock releases it.
//
// Equivalent to: `flock path`.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}
