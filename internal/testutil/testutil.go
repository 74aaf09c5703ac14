//go:build linux

// Package testutil holds the helpers that privileged tests share: skipping (or failing, in
// CI) when a privilege or kernel feature is missing, and throwaway namespaces that are always
// removed.
package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
)

// RequirePrivilegedEnv is the environment variable that turns "skip: needs root" into a
// failure. CI sets it so that privileged tests cannot silently stop running.
const RequirePrivilegedEnv = "KPBENCH_REQUIRE_PRIVILEGED"

// Missing skips the test with reason, or fails it when KPBENCH_REQUIRE_PRIVILEGED=1.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(RequirePrivilegedEnv) == "1" {
		t.Fatalf("%s (and %s=1 forbids skipping)", reason, RequirePrivilegedEnv)
	}
	t.Skip(reason)
}

// RequireRoot skips (or fails, see Missing) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root (network namespaces, netlink, netfilter)")
	}
}

// RequireBinary skips (or fails) unless every named program is on PATH.
func RequireBinary(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			Missing(t, "needs "+n+" on PATH (make deps installs it)")
		}
	}
}

// RandomID returns n random lowercase hex characters.
func RandomID(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)[:n]
}

// NewNetNS creates a throwaway named namespace `kpbt<pid>-<random>` with loopback up, and
// removes it in t.Cleanup. It needs root. The owner pid in the name lets
// `kpbench lab down --all` sweep namespaces of test binaries that crashed, and only those.
func NewNetNS(t testing.TB) (name, path string) {
	t.Helper()
	RequireRoot(t)
	name = fmt.Sprintf("%s%d-%s", netns.TestPrefix, os.Getpid(), RandomID(t, 6))
	path, err := netns.Create(name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = netns.Delete(name) })
	require.NoError(t, netns.LoopbackUp(path))
	return name, path
}
