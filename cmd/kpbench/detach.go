package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// detachSpec says how to start `kpbench ARGS` again in the background.
type detachSpec struct {
	// What names it in errors ("lab", "cluster").
	What string
	// Args are kpbench's arguments for the child (the same command without --detach).
	Args []string
	// Env is added to the child's environment.
	Env []string
	// Log receives the child's output; its directory is created.
	Log string
	// Timeout bounds the wait for Ready.
	Timeout time.Duration
	// Ready reports whether the child with this pid has finished starting (it reads the
	// child's registry record); polled every 200 ms.
	Ready func(pid int) bool
}

// startDetached starts kpbench again in its own session with spec.Args and waits until it
// is ready, exits, times out (then it is sent SIGTERM) or ctx ends (likewise). It returns
// the child's pid, released so that it outlives this process. A child that exits with
// status 2 refused its input: that is a usage error here too, with the log's content.
func startDetached(ctx context.Context, spec detachSpec) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(spec.Log), 0o755); err != nil {
		return 0, err
	}
	logFile, err := os.Create(spec.Log)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	child := exec.Command(self, spec.Args...)
	child.Stdout, child.Stderr = logFile, logFile
	child.Env = append(os.Environ(), spec.Env...)
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return 0, fmt.Errorf("start detached %s: %w", spec.What, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(spec.Timeout)
	for {
		select {
		case err := <-exited:
			tail, _ := os.ReadFile(spec.Log)
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == exitBadInput {
				return 0, usageError{fmt.Errorf("detached %s refused its configuration:\n%s", spec.What, tail)}
			}
			return 0, fmt.Errorf("detached %s exited before it was ready (%v):\n%s", spec.What, err, tail)
		case <-timeout:
			_ = child.Process.Signal(syscall.SIGTERM)
			return 0, fmt.Errorf("detached %s not ready after %s; sent it SIGTERM (log %s)", spec.What, spec.Timeout, spec.Log)
		case <-ctx.Done():
			_ = child.Process.Signal(syscall.SIGTERM)
			return 0, ctx.Err()
		case <-tick.C:
			if spec.Ready(child.Process.Pid) {
				pid := child.Process.Pid
				_ = child.Process.Release()
				return pid, nil
			}
		}
	}
}
