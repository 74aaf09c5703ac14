//go:build linux

package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// logTailLines is how many lines of a component's log an error shows.
const logTailLines = 20

// component is one long-running process of the control plane.
type component struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process has exited
	waitErr   error         // set before done is closed
}

// startComponent starts bin on the worker's thread, so that it runs in the worker's
// namespace; it is killed if that thread dies (Pdeathsig), so a crashed kpbench leaves no
// API server behind. Output goes to logPath.
func startComponent(ctx context.Context, w *netns.Worker, name, bin string, args []string, logPath string) (*component, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.Run(ctx, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		return cmd.Start()
	}); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &component{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// waitReady polls check until it succeeds, the process exits, or timeout passes; errors
// carry the log tail.
func (c *component) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited during start-up (%v); last lines of %s:\n%s", c.name, c.waitErr, c.log, tail(c.log, logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (%v, last check: %v); last lines of %s:\n%s", c.name, timeout, ctx.Err(), last, c.log, tail(c.log, logTailLines))
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM, then SIGKILL after grace (or when ctx ends), and waits for the exit.
func (c *component) stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", c.name, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	return nil
}

// rss reads the process's VmRSS.
func (c *component) rss() (uint64, error) {
	select {
	case <-c.done:
		return 0, fmt.Errorf("%s has exited", c.name)
	default:
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("%s rss: %w", c.name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s rss %q: %w", c.name, v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS in /proc/%d/status", c.name, c.cmd.Process.Pid)
}

// tail returns the last n lines of a file ("(no log)" when unreadable).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
