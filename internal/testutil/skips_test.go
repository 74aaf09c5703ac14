//go:build linux

package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEverySkipObeysCI: a test skips through Missing (or RequireRoot, RequireBinary),
// which fails under KPBENCH_REQUIRE_PRIVILEGED=1, so that a test that cannot run in CI
// fails there. The plain skips left are listed here, each with why CI still runs what it
// guards.
func TestEverySkipObeysCI(t *testing.T) {
	allowed := map[string][]string{
		// Helper process, not a test: it runs only as the child of TestKill*.
		"cmd/kpbench/kill_test.go": {`"helper process only"`},
		// No VM in the VM: CI runs these on the host.
		"microvm/vm_priv_test.go": {`"already inside the VM"`},
		"cmd/kpbench/vm_test.go":  {`"already inside the VM"`},
		// -short only: make test does not pass it.
		"scenarios/load_bounds_test.go":     {`"loads eight files of up to 1 MB"`},
		"scenarios/load_1mb_test.go":        {`"loads a 1 MB scenario"`},
		"cmd/kpbench/validate_once_test.go": {`"validates a 300 kB scenario"`},
		// This kernel has no IPVS: make test-vm runs these in the microVM with
		// KPBENCH_REQUIRE_IPVS=1, which makes them fail instead of skipping; the refusal
		// on a kernel without IPVS runs on the host.
		"backends/ipvs/privileged_linux_test.go": {`"kernel has no IPVS (run it`, `"this kernel has IPVS; the refusal`},
		"backends/all/tools_test.go":             {`"kernel has no IPVS: make test-vm`},
		"backends/all/all_test.go":               {`"kernel has no IPVS: make test-vm`},
		"scenarios/shipped_smoke_test.go":        {`"kernel has no IPVS: make test-vm`},
		// Fail under KPBENCH_REQUIRE_UPSTREAM=1, which .ci/run sets (make upstream builds agnhost).
		"kubestack/kubelet/agnhost_test.go":            {`"needs the agnhost binary at %s: run make upstream"`},
		"kubestack/kubelet/kubectl_privileged_test.go": {`"no agnhost binary built: /agnhost is not there to run"`},
		// Fails under KPBENCH_REQUIRE_VAGRANT=1, which .ci/run sets.
		"microvm/vagrant_test.go": {`"vagrant not on PATH`},
	}
	root := moduleRoot(t)
	skip := regexp.MustCompile(`\b[a-z]+\.Skip(f|Now)?\(`)
	var unexplained []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "out" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if rel == "internal/testutil/skips_test.go" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for n, line := range strings.Split(string(data), "\n") {
			if !skip.MatchString(line) || strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			ok := false
			for _, why := range allowed[rel] {
				ok = ok || strings.Contains(line, why)
			}
			if !ok {
				unexplained = append(unexplained, rel+":"+strconv.Itoa(n+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, unexplained, "skip through testutil.Missing (RequireRoot, RequireBinary), which fails under %s=1, or say here why CI runs what the skip guards", RequirePrivilegedEnv)
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}
