// Package upstreamtest lets tests that need the upstream binaries (internal/upstream) skip, or
// fail under KPBENCH_REQUIRE_UPSTREAM=1, when `make upstream` has not been run.
package upstreamtest

import (
	"os"
	"testing"

	"kpbench.dev/kpbench/internal/upstream"
)

// Require returns the paths of the named upstream binaries (default: all of them), keyed by
// name. When one is missing it skips the test with "run make upstream", or fails it when
// KPBENCH_REQUIRE_UPSTREAM=1.
func Require(t testing.TB, names ...string) map[string]string {
	t.Helper()
	if len(names) == 0 {
		names = upstream.Names()
	}
	paths := make(map[string]string, len(names))
	for _, n := range names {
		p, err := upstream.Binary(n)
		if err != nil {
			if os.Getenv(upstream.RequireEnv) == "1" {
				t.Fatalf("%v (and %s=1 forbids skipping)", err, upstream.RequireEnv)
			}
			t.Skipf("needs upstream binaries: run make upstream (%v)", err)
		}
		paths[n] = p
	}
	return paths
}
