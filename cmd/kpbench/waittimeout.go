//go:build linux

package main

import (
	"time"

	"github.com/spf13/cobra"

	"kpbench.dev/kpbench/microvm"
	"kpbench.dev/kpbench/scenarios"
)

// emulatedWaitTimeout is the default of --wait-timeout in a microVM guest under TCG:
// there a kube-proxy-ipvs sync, which runs iptables and ipset commands, takes 8-18 s
// (its own log, 2026-12-03), so a wait that needs two syncs and a confirmation can
// pass the 60 s that suffice everywhere else.
const emulatedWaitTimeout = 3 * time.Minute

// defaultWaitTimeout is --wait-timeout's default: emulatedWaitTimeout in a TCG guest
// (getenv reads the variables microvm.RunOutcome sets there), else scenarios.DefaultWaitTimeout.
func defaultWaitTimeout(getenv func(string) string) time.Duration {
	if getenv(microvm.EnvInVM) == "1" && getenv(microvm.EnvAccel) == "tcg" {
		return emulatedWaitTimeout
	}
	return scenarios.DefaultWaitTimeout
}

// addWaitTimeoutFlag adds --wait-timeout, the bound of wait {synced} steps that set no
// timeout of their own.
func addWaitTimeoutFlag(cmd *cobra.Command, d *time.Duration, getenv func(string) string) {
	cmd.Flags().DurationVar(d, "wait-timeout", defaultWaitTimeout(getenv),
		"bound of the wait {synced} steps that set no timeout (3m by default in a microVM guest under TCG, where kube-proxy-ipvs syncs take 8-18 s)")
}
