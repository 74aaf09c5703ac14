//go:build linux

package microvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVagrantfileValidates runs `vagrant validate --ignore-provider` (no VirtualBox or
// libvirt is needed) on the repository's Vagrantfile (the
// workshop VM, see WORKSHOP.md) and checks that its provisioning uses the same dependency
// script as `make deps`. Vagrant is not one of the default dependencies (it pulls a Ruby
// stack): install it with `KPBENCH_EXTRA_PACKAGES=vagrant make deps`. The test skips without
// it, and fails instead when KPBENCH_REQUIRE_VAGRANT=1.
func TestVagrantfileValidates(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	vf, err := os.ReadFile(filepath.Join(root, "Vagrantfile"))
	require.NoError(t, err)
	for _, want := range []string{"hack/install-deps.sh", "debian/bookworm64", "go.dev/dl/go", "ip_vs"} {
		assert.Contains(t, string(vf), want, "the Vagrantfile's provisioning")
	}
	if _, err := exec.LookPath("vagrant"); err != nil {
		if os.Getenv("KPBENCH_REQUIRE_VAGRANT") == "1" {
			t.Fatal("vagrant not on PATH (KPBENCH_EXTRA_PACKAGES=vagrant make deps installs it)")
		}
		t.Skip("vagrant not on PATH (KPBENCH_EXTRA_PACKAGES=vagrant make deps installs it)")
	}
	tmp := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "vagrant", "validate", "--ignore-provider")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VAGRANT_HOME="+filepath.Join(tmp, "home"),
		"VAGRANT_DOTFILE_PATH="+filepath.Join(tmp, "dot"), "VAGRANT_CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "vagrant validate: %s", out)
	assert.Contains(t, strings.ToLower(string(out)), "vagrantfile validated successfully")
}
