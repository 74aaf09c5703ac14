//go:build linux

package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/proc"
)

// logTailLines is how many lines of a component's log an error shows.
const logTailLines = 20

// component is one long-running process of the control plane.
type component struct {
	name, log string
	*proc.Process
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
	return &component{name: name, log: logPath, Process: proc.Watch(cmd, func() { f.Close() })}, nil
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
		case <-c.Done():
			_, err := c.Exited()
			return fmt.Errorf("%s exited during start-up (%v); last lines of %s:\n%s", c.name, err, c.log, tail(c.log, logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (%v, last check: %v); last lines of %s:\n%s", c.name, timeout, ctx.Err(), last, c.log, tail(c.log, logTailLines))
		case <-tick.C:
		}
	}
}

// rss reads the process's VmRSS.
func (c *component) rss() (uint64, error) {
	if done, _ := c.Exited(); done {
		return 0, fmt.Errorf("%s has exited", c.name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid()))
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
	return 0, fmt.Errorf("%s: no VmRSS in /proc/%d/status", c.name, c.Pid())
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
