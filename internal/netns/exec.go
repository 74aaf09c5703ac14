//go:build linux

package netns

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Command describes one external tool run inside a namespace.
type Command struct {
	// Path is the program, looked up in PATH when it has no slash (in the tool root's
	// ToolDirs when run through Tools with a root).
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Stdin, when not nil, is written to the program's standard input.
	Stdin []byte
	// Env is added to the process environment (KEY=VALUE), e.g. XTABLES_LOCKFILE.
	Env []string
	// DiscardStdout drops what the program prints on standard output instead of keeping
	// it in Result.Stdout (for listings nobody reads, such as iptables' cache hint).
	DiscardStdout bool
}

// String renders the command line ("ipvsadm -Ln"), for error messages and listings.
func (c Command) String() string {
	return strings.Join(append([]string{c.Path}, c.Args...), " ")
}

// Result is what a Command printed and what it cost.
type Result struct {
	Stdout, Stderr []byte
	// CPU is the tool's user+system time (what applying rules cost beside wall time).
	CPU time.Duration
}

// Exec runs cmd inside the namespace at nsPath and waits for it. The child inherits the
// namespace of the locked thread that forks it. A non-zero exit is an error that carries
// the tool's stderr.
//
// Equivalent to: `ip netns exec $ns $cmd`.
func Exec(ctx context.Context, nsPath string, cmd Command) (Result, error) {
	var res Result
	err := Do(nsPath, func() error {
		var err error
		res, err = execHere(ctx, cmd, cmd.Path, "")
		return err
	})
	return res, err
}

// execHere runs cmd in the calling thread's namespace. The program is path; with a root,
// path is inside it and the child chroots into it (and starts in its /) before exec.
func execHere(ctx context.Context, cmd Command, path, root string) (Result, error) {
	if err := Guard(); err != nil {
		return Result{}, fmt.Errorf("%s: %w", cmd, err)
	}
	c := exec.CommandContext(ctx, path, cmd.Args...)
	c.Args[0] = cmd.Path // what the tool sees as its name (xtables-multi dispatches on it)
	// The tool dies with the thread that started it: a kpbench killed with SIGKILL in the
	// middle of a sync leaves no iptables-restore or nft running on in a lab namespace
	// (the calling thread is locked and waits for the tool, so only its death fires this).
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if root != "" {
		c.SysProcAttr.Chroot = root
		c.Dir = "/"
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if cmd.DiscardStdout {
		c.Stdout = io.Discard
	}
	if cmd.Stdin != nil {
		c.Stdin = bytes.NewReader(cmd.Stdin)
	}
	if len(cmd.Env) > 0 {
		c.Env = append(c.Environ(), cmd.Env...)
	}
	err := c.Run()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if c.ProcessState != nil {
		res.CPU = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w: %s", cmd, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return res, nil
}
