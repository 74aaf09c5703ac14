//go:build linux

package kubeproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/netns"
)

// process is one long-running program inside a node's namespace.
type process struct {
	cmd     *exec.Cmd
	log     *os.File
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, once done is closed
}

// startIn starts bin with args inside the namespace at nsPath, its output appended to
// logPath. The child is forked from a thread locked inside the namespace, so it lives
// there; it gets SIGKILL if that thread (and so kpbench) dies, which netns.Do only lets
// happen when the thread could not leave the namespace. Stop it with stop.
//
// Equivalent to: `ip netns exec $ns $bin $args >>$log 2>&1 &`.
func startIn(nsPath, bin string, args []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	p := &process{log: f, logPath: logPath, done: make(chan struct{})}
	err = netns.Do(nsPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		p.cmd = exec.Command(bin, args...)
		p.cmd.Stdout, p.cmd.Stderr = f, f
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		return p.cmd.Start()
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s in %s: %w", bin, nsPath, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace for the process to end, then kills it.
func (p *process) stop(ctx context.Context, grace time.Duration) error {
	if done, _ := p.exited(); done {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pid %d: %w", p.cmd.Process.Pid, err)
	}
	<-p.done
	return nil
}

// binaryVersion finds the release in `kube-proxy --version` ("Kubernetes v1.37.2").
var binaryVersion = regexp.MustCompile(`\bv\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?\b`)

// BinaryVersion returns the release a kube-proxy binary says it is, for a binary given by
// path (its configuration depends on it: see Config.Render). It runs the binary on the
// host with --version only, which reads nothing and binds nothing.
//
// Equivalent to: `kube-proxy --version`.
func BinaryVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	v := binaryVersion.FindString(string(out))
	if v == "" {
		return "", fmt.Errorf("%s --version: no release in %q", bin, bytes.TrimSpace(out))
	}
	return v, nil
}

// tailFile returns the last n lines of a log file, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
