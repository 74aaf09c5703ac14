//go:build linux

package microvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	checkVagrantfileSettings(t, string(vf), root)
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

// checkVagrantfileSettings checks what the workshop VM needs of its settings, without
// vagrant: /vagrant is an rsync copy (the debian/bookworm64 box has no VirtualBox guest
// additions, so the default share may not mount) that leaves the VM's results alone, and
// the guest has more memory than make vm-ladder's microVM, in which the three modes ran to
// 5k Services (make bench goes to 10k and compiles kpbench first).
func checkVagrantfileSettings(t *testing.T, vf, root string) {
	t.Helper()
	assert.Regexp(t, `synced_folder "\.", "/vagrant", type: "rsync", rsync__exclude: \[[^\]]*"/out/"`, vf,
		"/vagrant: an explicit rsync copy that does not delete the VM's out/")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	ladder := regexp.MustCompile(`(?m)^vm-ladder:.*\n.*--mem (\d+)G`).FindSubmatch(mk)
	require.NotNil(t, ladder, "make vm-ladder's --mem NG")
	ladderGiB, _ := strconv.Atoi(string(ladder[1]))
	mem := regexp.MustCompile(`(?m)^MEMORY_MB = (\d+)$`).FindStringSubmatch(vf)
	require.NotNil(t, mem, "MEMORY_MB = N")
	memMB, _ := strconv.Atoi(mem[1])
	assert.Greater(t, memMB, ladderGiB*1024, "the VM's memory against make vm-ladder's")
	assert.Regexp(t, `(?m)^CPUS = 2$`, vf, "the cores bench.yaml's sample counts are sized for")
	for _, provider := range []string{"vb", "lv"} {
		assert.Contains(t, vf, provider+".memory = MEMORY_MB")
		assert.Contains(t, vf, provider+".cpus = CPUS")
	}
}
