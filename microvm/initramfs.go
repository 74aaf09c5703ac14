//go:build linux

package microvm

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed" // init.sh
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// initScript is PID 1 of the guest.
//
//go:embed init.sh
var initScript string

// initramfsFormat is bumped when the way the image is built changes (not only init.sh), so
// that cached images are rebuilt.
const initramfsFormat = "kpbench-initramfs-1"

// moduleDirs are module directories copied whole into the initramfs (paths as in
// modules.dep): netfilter with IPVS and ipset, bridge, and what 9p and the overlay need.
func moduleDirs() []string {
	return []string{
		"kernel/net/netfilter", "kernel/net/ipv4/netfilter", "kernel/net/ipv6/netfilter",
		"kernel/net/bridge", "kernel/net/9p", "kernel/fs/9p", "kernel/fs/overlayfs",
		"kernel/drivers/virtio",
	}
}

// moduleFiles are single modules copied into the initramfs, without compression suffix.
// Absent ones are skipped (kernels differ).
func moduleFiles() []string {
	return []string{
		"kernel/drivers/net/dummy.ko", "kernel/drivers/net/veth.ko", "kernel/drivers/net/macvlan.ko",
		"kernel/drivers/net/vxlan/vxlan.ko", "kernel/net/ipv4/ipip.ko", "kernel/net/ipv4/tunnel4.ko",
		"kernel/net/ipv4/ip_tunnel.ko",
		// libcrc32c (conntrack, IPVS) needs a crc32c provider.
		"kernel/crypto/crc32c_generic.ko",
		// -m string
		"kernel/lib/ts_bm.ko", "kernel/lib/ts_kmp.ko", "kernel/lib/ts_fsm.ko",
		// vishvananda/netlink handles open a NETLINK_XFRM socket unless told the families.
		"kernel/net/xfrm/xfrm_user.ko",
		"kernel/drivers/char/virtio_console.ko", "kernel/drivers/char/hw_random/virtio-rng.ko",
	}
}

// requiredModules must be in the closure, or the VM cannot boot or is useless.
func requiredModules() []string {
	return []string{"9pnet_virtio", "9p", "overlay", "ip_vs", "nf_conntrack"}
}

// trimModExt removes a compression suffix: x.ko.xz -> x.ko.
func trimModExt(p string) string {
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		if strings.HasSuffix(p, ".ko"+ext) {
			return strings.TrimSuffix(p, ext)
		}
	}
	return p
}

// moduleName is the name modprobe knows: kernel/net/9p/9pnet_virtio.ko.xz -> 9pnet_virtio.
func moduleName(p string) string {
	return strings.TrimSuffix(filepath.Base(trimModExt(p)), ".ko")
}

// parseModulesDep reads modules.dep ("mod.ko: dep1.ko dep2.ko") into a map.
func parseModulesDep(r io.Reader) (map[string][]string, error) {
	deps := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(mod) == "" {
			return nil, fmt.Errorf("modules.dep line %d: %q: want MODULE: DEPS", n, line)
		}
		deps[strings.TrimSpace(mod)] = strings.Fields(rest)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read modules.dep: %w", err)
	}
	return deps, nil
}

// moduleClosure returns, sorted, the modules of modules.dep that lie under one of dirs or
// equal one of files (compression suffixes ignored), plus everything they depend on. It
// fails when a required module name is not in the result.
func moduleClosure(dep io.Reader, dirs, files, required []string) ([]string, error) {
	deps, err := parseModulesDep(dep)
	if err != nil {
		return nil, err
	}
	wantFile := map[string]bool{}
	for _, f := range files {
		wantFile[f] = true
	}
	seen := map[string]bool{}
	var visit func(m string) error
	visit = func(m string) error {
		if seen[m] {
			return nil
		}
		d, ok := deps[m]
		if !ok {
			return fmt.Errorf("modules.dep: %s is a dependency but has no line of its own", m)
		}
		seen[m] = true
		for _, x := range d {
			if err := visit(x); err != nil {
				return err
			}
		}
		return nil
	}
	for m := range deps {
		plain := trimModExt(m)
		want := wantFile[plain]
		for _, d := range dirs {
			want = want || strings.HasPrefix(plain, strings.TrimSuffix(d, "/")+"/")
		}
		if want {
			if err := visit(m); err != nil {
				return nil, err
			}
		}
	}
	out := make([]string, 0, len(seen))
	names := map[string]bool{}
	for m := range seen {
		out = append(out, m)
		names[moduleName(m)] = true
	}
	sort.Strings(out)
	var missing []string
	for _, r := range required {
		if !names[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("kernel has no module %s (built in kernels are not supported)", strings.Join(missing, ", "))
	}
	return out, nil
}

// initramfsKey identifies an initramfs built from this init script and module selection.
func initramfsKey() string {
	h := sha256.New()
	for _, s := range [][]string{{initramfsFormat, initScript}, moduleDirs(), moduleFiles()} {
		for _, x := range s {
			fmt.Fprintf(h, "%d:%s\n", len(x), x)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// buildInitramfs writes a gzipped newc cpio to out: a static busybox with its applets, init.sh
// as /init, and the module closure taken from modRoot (an extracted lib/modules/<release>),
// decompressed, stripped of debug data (and so of signatures) and re-indexed with depmod.
func buildInitramfs(ctx context.Context, tools map[string]string, modRoot, release, stage, out string) error {
	root := filepath.Join(stage, "root")
	for _, d := range []string{"bin", "sbin", "dev", "proc", "sys", "lower", "rw", "newroot", "share", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	depFile, err := os.Open(filepath.Join(modRoot, "modules.dep"))
	if err != nil {
		return fmt.Errorf("modules of %s: %w", release, err)
	}
	mods, err := moduleClosure(depFile, moduleDirs(), moduleFiles(), requiredModules())
	depFile.Close()
	if err != nil {
		return fmt.Errorf("modules of %s: %w", release, err)
	}
	dstMods := filepath.Join(root, "lib", "modules", release)
	var plain []string
	for _, m := range mods {
		dst := filepath.Join(dstMods, trimModExt(m))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyModule(ctx, tools, filepath.Join(modRoot, m), dst); err != nil {
			return err
		}
		plain = append(plain, dst)
	}
	if _, err := runTool(ctx, "", tools["strip"], append([]string{"--strip-debug"}, plain...)...); err != nil {
		return fmt.Errorf("strip modules: %w", err)
	}
	extra, _ := filepath.Glob(filepath.Join(modRoot, "modules.builtin*"))
	extra = append(extra, filepath.Join(modRoot, "modules.order"))
	for _, f := range extra {
		if err := copyFile(f, filepath.Join(dstMods, filepath.Base(f)), 0o644); err != nil {
			return err
		}
	}
	if _, err := runTool(ctx, "", tools["depmod"], "-b", root, release); err != nil {
		return fmt.Errorf("depmod initramfs: %w", err)
	}
	if err := installBusybox(ctx, tools["busybox"], root); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "init"), []byte(initScript), 0o755); err != nil {
		return err
	}
	return writeCpioGz(ctx, tools["cpio"], root, out)
}

// copyModule copies one module, decompressing .ko.xz (xz), .ko.gz and .ko.zst (zstd).
func copyModule(ctx context.Context, tools map[string]string, src, dst string) error {
	switch {
	case strings.HasSuffix(src, ".ko"):
		return copyFile(src, dst, 0o644)
	case strings.HasSuffix(src, ".ko.gz"):
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		return writeFrom(zr, dst)
	case strings.HasSuffix(src, ".ko.xz"), strings.HasSuffix(src, ".ko.zst"):
		prog := tools["xz"]
		if strings.HasSuffix(src, ".zst") {
			p, err := exec.LookPath("zstd")
			if err != nil {
				return fmt.Errorf("%w: zstd (for %s); install it: apt-get install -y zstd", ErrMissingTool, src)
			}
			prog = p
		}
		data, err := runTool(ctx, "", prog, "-dc", src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	}
	return fmt.Errorf("%s: unknown module format", src)
}

// installBusybox copies the static busybox to /bin and links every applet in /bin, plus the
// ones the kernel and init call by /sbin path.
func installBusybox(ctx context.Context, busybox, root string) error {
	if err := checkStatic(busybox); err != nil {
		return err
	}
	if err := copyFile(busybox, filepath.Join(root, "bin", "busybox"), 0o755); err != nil {
		return err
	}
	list, err := runTool(ctx, "", busybox, "--list")
	if err != nil {
		return fmt.Errorf("busybox applets: %w", err)
	}
	for _, a := range strings.Fields(string(list)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	// The kernel's request_module runs /sbin/modprobe.
	for _, a := range []string{"modprobe", "insmod", "lsmod", "rmmod", "poweroff", "chroot", "ip"} {
		if err := os.Symlink("../bin/busybox", filepath.Join(root, "sbin", a)); err != nil {
			return err
		}
	}
	return nil
}

// writeCpioGz archives root (sorted, owned by root) as a gzipped newc cpio at out.
func writeCpioGz(ctx context.Context, cpio, root, out string) error {
	var names []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	var stderr strings.Builder
	c := exec.CommandContext(ctx, cpio, "-o", "-H", "newc", "-R", "0:0", "--quiet")
	c.Dir = root
	c.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	c.Stdout, c.Stderr = zw, &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("cpio: %w: %s", err, tailLines(stderr.String(), 5))
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// copyFile copies src to dst with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := writeFrom(in, dst); err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}

// writeFrom creates dst with what r holds.
func writeFrom(r io.Reader, dst string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return out.Close()
}
