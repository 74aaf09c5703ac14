//go:build linux

package main

import (
	"os"
	"testing"

	"kpbench.dev/kpbench/kubestack/kubelet"
)

// TestMain lets the lab kubelets of `cluster up` in these tests re-execute this test binary
// as their exec helper (containers, probes and kubectl exec enter their pods through it),
// as kpbench's main dispatches the hidden subcommand.
func TestMain(m *testing.M) {
	kubelet.RunPodExecIfAsked()
	os.Exit(m.Run())
}
