//go:build linux

package microvm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"kpbench.dev/kpbench/internal/testutil"
)

func TestModuleClosure(t *testing.T) {
	wantPlain := []string{
		"kernel/drivers/net/dummy.ko",
		"kernel/fs/9p/9p.ko", "kernel/fs/fscache/fscache.ko", "kernel/fs/netfs/netfs.ko",
		"kernel/fs/overlayfs/overlay.ko",
		"kernel/lib/libcrc32c.ko",
		"kernel/net/9p/9pnet.ko", "kernel/net/9p/9pnet_virtio.ko",
		"kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko", "kernel/net/ipv6/netfilter/nf_defrag_ipv6.ko",
		"kernel/net/netfilter/ipvs/ip_vs.ko", "kernel/net/netfilter/ipvs/ip_vs_rr.ko",
		"kernel/net/netfilter/nf_conntrack.ko",
	}
	dirs := []string{"kernel/net/netfilter", "kernel/net/9p", "kernel/fs/9p/", "kernel/fs/overlayfs"}
	files := []string{"kernel/drivers/net/dummy.ko", "kernel/drivers/net/absent.ko"}
	tests := []struct {
		name     string
		file     string
		required []string
		want     []string
		wantErr  string
	}{
		{"plain modules", "testdata/modules.dep", requiredModules(), wantPlain, ""},
		{"xz modules", "testdata/modules.dep.xz-names", requiredModules(), withSuffix(wantPlain, ".xz"), ""},
		{"required missing", "testdata/modules.dep", []string{"ip_vs", "nft_ct"}, nil, "no module nft_ct"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Open(tt.file)
			require.NoError(t, err)
			defer f.Close()
			got, err := moduleClosure(f, dirs, files, tt.required)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func withSuffix(list []string, suffix string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s + suffix
	}
	return out
}

func TestModuleClosureBadInput(t *testing.T) {
	tests := []struct {
		name, dep, wantErr string
	}{
		{"no colon", "kernel/a.ko kernel/b.ko\n", "line 1"},
		{"dangling dependency", "kernel/net/netfilter/a.ko: kernel/b.ko\n", "kernel/b.ko is a dependency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := moduleClosure(strings.NewReader(tt.dep), []string{"kernel/net/netfilter"}, nil, nil)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/net/9p/9pnet_virtio.ko.xz": "9pnet_virtio",
		"kernel/fs/9p/9p.ko":               "9p",
		"kernel/x/y.ko.zst":                "y",
	} {
		assert.Equal(t, want, moduleName(in), in)
	}
}

func TestConfigDefaults(t *testing.T) {
	noEnv := func(string) string { return "" }
	got, err := Config{}.withDefaults(noEnv)
	require.NoError(t, err)
	assert.Equal(t, DefaultKernel, got.Kernel)
	assert.Equal(t, 2048, got.MemoryMB)
	assert.Equal(t, 2, got.CPUs)
	assert.Equal(t, "/var/cache/kpbench/vm", got.CacheDir)
	assert.Equal(t, 30*time.Minute, got.Timeout)
	assert.Equal(t, AccelTCG, got.Accel)
	assert.NotNil(t, got.Stdout)
	assert.NotNil(t, got.Stderr)
	assert.Equal(t, "linux-image-6.1.0-57-amd64", got.packageName())

	kvmEnv := func(k string) string {
		if k == EnvAccel {
			return AccelKVM
		}
		return ""
	}
	got, err = Config{}.withDefaults(kvmEnv)
	require.NoError(t, err)
	assert.Equal(t, AccelKVM, got.Accel, "KPBENCH_VM_ACCEL chooses when Accel is empty")
	got, err = Config{Accel: AccelTCG}.withDefaults(kvmEnv)
	require.NoError(t, err)
	assert.Equal(t, AccelTCG, got.Accel, "Accel wins over the environment")

	appendEnv := func(k string) string {
		if k == EnvAppend {
			return " nohz=off  clocksource=hpet "
		}
		return ""
	}
	got, err = Config{}.withDefaults(appendEnv)
	require.NoError(t, err)
	assert.Equal(t, []string{"nohz=off", "clocksource=hpet"}, got.Append, "KPBENCH_VM_APPEND when Append is empty")
	got, err = Config{Append: []string{"a=1"}}.withDefaults(appendEnv)
	require.NoError(t, err)
	assert.Equal(t, []string{"a=1"}, got.Append, "Append wins over the environment")
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"6.12 kernel", Config{Kernel: "6.12.100+deb12"}, ""},
		{"other 6.1", Config{Kernel: "6.1.0-50"}, ""},
		{"flavour", Config{Kernel: "6.1.0-57-amd64"}, "without the -amd64"},
		{"word", Config{Kernel: "latest"}, "Debian kernel version"},
		{"slash", Config{Kernel: "6.1.0-57/../x"}, "Debian kernel version"},
		{"space", Config{Kernel: "6.1.0-57 x"}, "Debian kernel version"},
		{"memory", Config{MemoryMB: 100}, "at least 256"},
		{"cpus", Config{CPUs: -1}, "cpus -1"},
		{"timeout", Config{Timeout: -time.Second}, "positive"},
		{"accel", Config{Accel: "hvf"}, "want tcg or kvm"},
		{"env", Config{Env: []string{"NOEQUALS"}}, "KEY=VALUE"},
		{"kernel word", Config{Append: []string{"nohz=off"}}, ""},
		{"kernel word with blank", Config{Append: []string{"nohz=off quiet"}}, "one word without blanks"},
		{"empty kernel word", Config{Append: []string{""}}, "one word without blanks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.withDefaults(func(string) string { return "" })
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestGuestEnv(t *testing.T) {
	host := []string{
		"PATH=/usr/bin:/bin", "HOME=/root", "GOFLAGS=-count=1", "SSH_AUTH_SOCK=/x", "TERM=xterm",
		"KPBENCH_REQUIRE_PRIVILEGED=1", "KPBENCH_IN_VM=0", "KPBENCH_VM_ACCEL=kvm", "KPBENCH_VM_KERNEL=old",
		"LD_PRELOAD=/evil.so", "GOPATH=/go", "NOEQUALS",
	}
	cfg := Config{Accel: AccelTCG, Kernel: "6.1.0-57"}
	got := guestEnv(host, cfg, []string{"FOO=bar", "PATH=/opt/bin"})
	assert.Equal(t, []string{
		"PATH=/opt/bin", "HOME=/root", "GOFLAGS=-count=1", "KPBENCH_REQUIRE_PRIVILEGED=1",
		"TERM=dumb", "KPBENCH_IN_VM=1", "KPBENCH_VM_ACCEL=tcg", "KPBENCH_VM_KERNEL=6.1.0-57", "FOO=bar",
	}, got)
}

// TestRunScriptQuoting runs the generated run.sh with the host's sh and checks that the
// command receives its arguments, environment and directory byte for byte.
func TestRunScriptQuoting(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "dir with 'quote' and $x")
	require.NoError(t, os.Mkdir(dir, 0o755))
	argv := []string{sh, "-c", `printf '%s|' "$@"; printf '%s|%s|' "$V" "$(pwd)"`, "sh",
		"plain", "two words", "it's", `"double"`, `$HOME`, "`date`", "back\\slash", "new\nline", "", "A=B", "*"}
	script := runScript(dir, []string{"V=x'y z", "PATH=/usr/bin:/bin"}, argv)
	c := exec.Command(sh, "-c", script)
	c.Env = []string{}
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s\nscript:\n%s", out, script)
	assert.Equal(t, "plain|two words|it's|\"double\"|$HOME|`date`|back\\slash|new\nline||A=B|*|x'y z|"+dir+"|", string(out))

	c = exec.Command(sh, "-c", runScript(filepath.Join(dir, "missing"), nil, []string{"true"}))
	err = c.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 125, ee.ExitCode(), "a missing directory is exit 125")
}

func TestShellQuote(t *testing.T) {
	tests := map[string]string{
		"":     "''",
		"a b":  "'a b'",
		"it's": `'it'\''s'`,
		"$x":   "'$x'",
	}
	for in, want := range tests {
		assert.Equal(t, want, shellQuote(in), in)
	}
}

func TestWritableDirs(t *testing.T) {
	tests := []struct {
		name    string
		list    []string
		cwd     string
		want    []string
		wantErr string
	}{
		{"default cwd", nil, "/work/main", []string{"/work/main"}, ""},
		{"cwd is root", nil, "/", nil, ""},
		{"relative and dupes", []string{"out", "/work/main/out/", "/tmp/x"}, "/work/main", []string{"/work/main/out", "/tmp/x"}, ""},
		{"root refused", []string{"/tmp/.."}, "/work", nil, "refused"},
		{"newline refused", []string{"/tmp/a\nb"}, "/work", nil, "newlines"},
		{"trailing blank refused", []string{"/tmp/a "}, "/work", nil, "blanks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := writableDirs(tt.list, tt.cwd)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	assert.Equal(t, "rw0 /a b\nrw1 /c\n", mountsFile([]string{"/a b", "/c"}))
}

func TestQemuArgs(t *testing.T) {
	img := Image{Release: "6.1.0-57-amd64", Vmlinux: "/c/vmlinux", Initramfs: "/c/i.cpio.gz"}
	tests := []struct {
		name     string
		cfg      Config
		debug    bool
		want     []string
		wantNot  []string
		wantLast string
	}{
		{"tcg", Config{Accel: AccelTCG, CPUs: 2, MemoryMB: 2048}, false,
			[]string{"-accel tcg,thread=single,tb-size=256", "-cpu max", "-smp 2", "-m 2048", "-no-reboot", "-bios " + qbootROM,
				"-kernel /c/vmlinux", "-initrd /c/i.cpio.gz",
				"-fsdev local,id=rw0,path=/work/a,,b,security_model=none,multidevs=remap",
				"-device virtio-9p-pci,fsdev=rw0,mount_tag=rw0"},
			[]string{"kvm", "kpbvm.debug"}, ""},
		{"kvm debug", Config{Accel: AccelKVM, CPUs: 1, MemoryMB: 512}, true,
			[]string{"-accel kvm", "-cpu host", "-smp 1", "-m 512"},
			[]string{"tcg", " quiet"}, ""},
		{"multi-threaded tcg when asked", Config{Accel: AccelTCG, CPUs: 2, MemoryMB: 512, MultiThreadTCG: true}, false,
			[]string{"-accel tcg,thread=multi,tb-size=256"}, []string{"thread=single"}, ""},
		{"extra kernel words last", Config{Accel: AccelTCG, CPUs: 1, MemoryMB: 512, Append: []string{"nohz=off", "clocksource=hpet"}}, false,
			nil, nil, "quiet nohz=off clocksource=hpet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := qemuArgs(tt.cfg, img, "/tmp/kpbench-vm-1", []string{"/work/a,b"}, tt.debug)
			joined := " " + strings.Join(args, " ") + " "
			for _, w := range tt.want {
				assert.Contains(t, joined, " "+w+" ")
			}
			for _, w := range tt.wantNot {
				assert.NotContains(t, joined, w)
			}
			i := indexOf(args, "-append")
			require.GreaterOrEqual(t, i, 0)
			assert.Contains(t, args[i+1], "kpbvm.share=/tmp/kpbench-vm-1")
			assert.Contains(t, args[i+1], "console=ttyS0")
			assert.Contains(t, args[i+1], "log_buf_len=", "a ring buffer that holds the run's kernel log")
			assert.Contains(t, args[i+1], "no_timer_check", "the IO-APIC timer check panics on a busy host")
			if tt.wantLast != "" {
				assert.True(t, strings.HasSuffix(args[i+1], tt.wantLast), "append %q", args[i+1])
			}
		})
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func TestInitramfsKeyTracksInit(t *testing.T) {
	k := initramfsKey()
	assert.Len(t, k, 16)
	assert.Equal(t, k, initramfsKey(), "stable")
	assert.Contains(t, initScript, "kpbvm.share=", "init.sh is embedded")
}

func TestExtractVmlinux(t *testing.T) {
	testutil.RequireBinary(t, "xz") // make vm-deps installs it; CI fails without it
	xz, err := exec.LookPath("xz")
	require.NoError(t, err)
	elfData := []byte("\x7fELF fake kernel body")
	tests := []struct {
		name, compressor string
		payload          []byte // nil: compress elfData with compressor
		wantErr          string
	}{
		{name: "xz", compressor: "xz"},
		{name: "zstd", compressor: "zstd"},
		{name: "no stream", payload: []byte("no stream here"), wantErr: "no XZ or zstd stream"},
		{name: "not an ELF", compressor: "xz", payload: []byte("plain text"), wantErr: "not an ELF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			payload := tt.payload
			if tt.compressor != "" {
				testutil.RequireBinary(t, tt.compressor)
				prog, err := exec.LookPath(tt.compressor)
				require.NoError(t, err)
				if payload == nil {
					payload = elfData
				}
				c := exec.Command(prog, "-c")
				c.Stdin = bytes.NewReader(payload)
				payload, err = c.Output()
				require.NoError(t, err)
			}
			// A bzImage: setup code, the compressed stream, then a trailing size word.
			bz := append(append([]byte("MZ setup code\x00\x01"), payload...), 0x10, 0x20, 0x30, 0x00)
			in, out := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "vmlinux")
			require.NoError(t, os.WriteFile(in, bz, 0o644))
			err := extractVmlinux(t.Context(), xz, in, out)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Equal(t, elfData, got)
		})
	}
}

func TestLookTools(t *testing.T) {
	_, err := lookTools([]tool{{"kpbench-no-such-tool", "kpbench-pkg"}, {"sh", "dash"}})
	require.ErrorIs(t, err, ErrMissingTool)
	assert.Contains(t, err.Error(), "apt-get install -y --no-install-recommends kpbench-pkg")
	assert.NotContains(t, err.Error(), "dash")
}
