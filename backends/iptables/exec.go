//go:build linux

package iptables

import (
	"context"
	"errors"

	"kpbench.dev/kpbench/internal/netns"
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
type execResult = netns.Result

// execer runs a tool inside the node's namespace. The real one is netns.Tools (the host's
// tools or a tool root's; a non-zero exit is an error wrapping *exec.ExitError with
// stderr); unit tests use a fake that records argv and stdin.
type execer interface {
	Exec(ctx context.Context, cmd netns.Command) (execResult, error)
}

// exitCode returns the exit status carried by err, or -1.
func exitCode(err error) int {
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
