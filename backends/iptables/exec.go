//go:build linux

package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"kpbench.dev/kpbench/lab/netns"
)

// Flavor selects which iptables binaries program the kernel.
type Flavor string

// The two iptables flavours of iptables 1.8.
const (
	// FlavorNFT uses iptables-nft and iptables-nft-restore (nf_tables kernel API).
	FlavorNFT Flavor = "nft"
	// FlavorLegacy uses iptables-legacy and iptables-legacy-restore (x_tables, whole-table
	// replacement).
	FlavorLegacy Flavor = "legacy"
)

// Binaries returns the iptables, iptables-restore and iptables-save programs of the flavour.
func (f Flavor) Binaries() (iptables, restore, save string) {
	if f == FlavorLegacy {
		return "iptables-legacy", "iptables-legacy-restore", "iptables-legacy-save"
	}
	return "iptables-nft", "iptables-nft-restore", "iptables-nft-save"
}

// execResult is what one exec'd tool printed and cost.
type execResult struct {
	Stdout, Stderr []byte
	// CPU is the tool's user+system time.
	CPU time.Duration
}

// execer runs a tool inside the node's namespace. The real one is nsExecer; unit tests use
// a fake that records argv and stdin.
type execer interface {
	Run(ctx context.Context, cmd netns.Command) (execResult, error)
}

// nsExecer runs commands in the namespace at path, on a thread locked there (lab/netns.Do),
// so the child inherits the namespace.
type nsExecer struct{ path string }

// Run implements execer. A non-zero exit is an error wrapping *exec.ExitError with stderr.
//
// Equivalent to: `ip netns exec $ns $cmd`.
func (e nsExecer) Run(ctx context.Context, cmd netns.Command) (execResult, error) {
	var res execResult
	err := netns.Do(e.path, func() error {
		if err := netns.Guard(); err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		c := exec.CommandContext(ctx, cmd.Path, cmd.Args...)
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		if cmd.Stdin != nil {
			c.Stdin = bytes.NewReader(cmd.Stdin)
		}
		if len(cmd.Env) > 0 {
			c.Env = append(c.Environ(), cmd.Env...)
		}
		runErr := c.Run()
		res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
		if c.ProcessState != nil {
			res.CPU = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
		}
		if runErr != nil {
			return fmt.Errorf("%s: %w: %s", cmd, runErr, bytes.TrimSpace(stderr.Bytes()))
		}
		return nil
	})
	return res, err
}

// exitCode returns the exit status carried by err, or -1.
func exitCode(err error) int {
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
