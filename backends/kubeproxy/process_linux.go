//go:build linux

package kubeproxy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/proc"
)

// startIn starts bin with args inside the namespace at nsPath, its output appended to
// logPath. The child is forked from a thread locked inside the namespace, so it lives
// there; it gets SIGKILL if that thread (and so kpbench) dies, which netns.Do only lets
// happen when the thread could not leave the namespace. Stop it with Stop.
//
// Equivalent to: `ip netns exec $ns $bin $args >>$log 2>&1 &`.
func startIn(nsPath, bin string, args []string, logPath string) (*proc.Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = netns.Do(nsPath, func() error {
		if err := netns.Guard(); err != nil {
			return err
		}
		return cmd.Start()
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s in %s: %w", bin, nsPath, err)
	}
	return proc.Watch(cmd, func() { f.Close() }), nil
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
