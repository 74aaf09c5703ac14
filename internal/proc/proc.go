// Package proc watches the long-running processes kpbench starts (kube-proxy, the control
// plane's components): it waits for each in the background, tells whether it has exited,
// and stops it.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a started command whose exit is awaited in the background.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

// Watch waits for the started cmd in the background; afterExit (nil: nothing) runs once it
// has exited and before Done is closed, e.g. to close its log file.
func Watch(cmd *exec.Cmd, afterExit func()) *Process {
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if afterExit != nil {
			afterExit()
		}
		close(p.done)
	}()
	return p
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how (exec.Cmd.Wait's error).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to grace (or until ctx ends) for the process to exit, then
// sends SIGKILL, and returns once it has exited. A process that has exited already is
// left alone.
//
// Equivalent to: `kill $pid; sleep $grace; kill -9 $pid`.
func (p *Process) Stop(ctx context.Context, grace time.Duration) error {
	if done, _ := p.Exited(); done {
		return nil
	}
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			return nil
		case <-t.C:
		case <-ctx.Done():
		}
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pid %d: %w", p.Pid(), err)
	}
	<-p.done
	return nil
}
