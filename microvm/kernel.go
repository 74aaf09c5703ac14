//go:build linux

package microvm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"kpbench.dev/kpbench/internal/fsutil"
)

// Image is a bootable kernel and initramfs in the cache.
type Image struct {
	// Release is the guest's `uname -r`, e.g. 6.1.0-57-amd64.
	Release string
	// Vmlinux is the uncompressed ELF kernel, booted through PVH.
	Vmlinux string
	// Initramfs is the gzipped cpio with busybox, init.sh and the modules.
	Initramfs string
}

// EnsureKernel returns the cached kernel and initramfs for cfg.Kernel, building what is
// missing: `apt-get download linux-image-<version>-amd64` (after one `apt-get update` if apt
// does not know the package), `dpkg-deb -x`, `depmod -b`, the uncompressed vmlinux cut out of
// the vmlinuz, and the initramfs, keyed by a hash of init.sh and the module selection.
// Every piece is built in a temporary directory and renamed into place, so a crash leaves no
// half-built cache; a lock file serialises builders. Progress goes to cfg.Stderr.
func EnsureKernel(ctx context.Context, cfg Config) (Image, error) {
	cfg, err := cfg.withDefaults(os.Getenv)
	if err != nil {
		return Image{}, err
	}
	rel := cfg.kernelRelease()
	kdir := filepath.Join(cfg.CacheDir, rel)
	img := Image{
		Release:   rel,
		Vmlinux:   filepath.Join(kdir, "vmlinux"),
		Initramfs: filepath.Join(kdir, "initramfs-"+initramfsKey()+".cpio.gz"),
	}
	if exists(img.Vmlinux) && exists(img.Initramfs) {
		return img, nil
	}
	tools, err := lookTools(buildTools())
	if err != nil {
		return Image{}, err
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return Image{}, fmt.Errorf("vm cache: %w", err)
	}
	unlock, err := lockDir(ctx, cfg.CacheDir)
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if !exists(img.Vmlinux) {
		if err := buildKernelDir(ctx, cfg, tools, kdir); err != nil {
			return Image{}, fmt.Errorf("kernel %s: %w", cfg.Kernel, err)
		}
	}
	if !exists(img.Initramfs) {
		start := time.Now()
		stage, err := os.MkdirTemp(kdir, ".tmp-initramfs-")
		if err != nil {
			return Image{}, fmt.Errorf("initramfs: %w", err)
		}
		defer os.RemoveAll(stage)
		tmp := filepath.Join(stage, "initramfs.cpio.gz")
		modRoot := filepath.Join(kdir, "lib", "modules", rel)
		if err := buildInitramfs(ctx, tools, modRoot, rel, stage, tmp); err != nil {
			return Image{}, fmt.Errorf("initramfs for %s: %w", rel, err)
		}
		if err := os.Rename(tmp, img.Initramfs); err != nil {
			return Image{}, fmt.Errorf("initramfs: %w", err)
		}
		fmt.Fprintf(cfg.Stderr, "kpbench vm: built %s in %s\n", img.Initramfs, time.Since(start).Round(time.Millisecond))
	}
	return img, nil
}

// buildKernelDir downloads and unpacks the kernel package into kdir (atomically): kdir holds
// vmlinux, boot/config-* and lib/modules/<release> with a fresh modules.dep.
func buildKernelDir(ctx context.Context, cfg Config, tools map[string]string, kdir string) error {
	start := time.Now()
	tmp, err := os.MkdirTemp(cfg.CacheDir, ".tmp-kernel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// apt drops privileges to _apt for downloads; let it write here.
	if err := os.Chmod(tmp, 0o777); err != nil {
		return err
	}
	pkg := cfg.packageName()
	fmt.Fprintf(cfg.Stderr, "kpbench vm: downloading %s\n", pkg)
	if _, err := runTool(ctx, tmp, tools["apt-get"], "download", pkg); err != nil {
		fmt.Fprintf(cfg.Stderr, "kpbench vm: apt-get download failed, running apt-get update once\n")
		if _, uerr := runTool(ctx, "", tools["apt-get"], "update"); uerr != nil {
			return fmt.Errorf("%w (and apt-get update: %v)", err, uerr)
		}
		if _, err := runTool(ctx, tmp, tools["apt-get"], "download", pkg); err != nil {
			return fmt.Errorf("%w (is %s a kernel of this distribution? see apt-cache search linux-image)", err, pkg)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, pkg+"_*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s: want one .deb, found %d", pkg, len(debs))
	}
	x := filepath.Join(tmp, "x")
	if _, err := runTool(ctx, "", tools["dpkg-deb"], "-x", debs[0], x); err != nil {
		return err
	}
	rel := cfg.kernelRelease()
	if _, err := runTool(ctx, "", tools["depmod"], "-b", x, rel); err != nil {
		return err
	}
	if err := extractVmlinux(ctx, tools["xz"], filepath.Join(x, "boot", "vmlinuz-"+rel), filepath.Join(x, "vmlinux")); err != nil {
		return err
	}
	// Documentation and the compressed kernel are not needed any more.
	_ = os.RemoveAll(filepath.Join(x, "usr", "share"))
	_ = os.Remove(filepath.Join(x, "boot", "vmlinuz-"+rel))
	if err := os.Rename(x, kdir); err != nil {
		return fmt.Errorf("install %s: %w", kdir, err)
	}
	fmt.Fprintf(cfg.Stderr, "kpbench vm: unpacked %s in %s\n", pkg, time.Since(start).Round(time.Millisecond))
	return nil
}

// Magic numbers of the compressed payload inside a bzImage.
const (
	xzMagic   = "\xfd7zXZ\x00"
	zstdMagic = "\x28\xb5\x2f\xfd"
)

// extractVmlinux cuts the compressed kernel (XZ as in Debian 6.1, or zstd as in Debian 6.12)
// out of a bzImage and decompresses it into an ELF file, which QEMU boots directly through
// PVH (no SeaBIOS, no decompression in the guest). xz is the path of the xz program.
//
// Equivalent to: tail -c +$((off+1)) vmlinuz | xz -dc --single-stream > vmlinux
func extractVmlinux(ctx context.Context, xz, vmlinuz, out string) error {
	data, err := os.ReadFile(vmlinuz)
	if err != nil {
		return err
	}
	var c *exec.Cmd
	// zstd stops with an error at the size word the kernel appends after the frame; the
	// frame itself is complete, which the ELF check below confirms.
	tolerateExit := false
	if off := bytes.Index(data, []byte(xzMagic)); off >= 0 {
		c = exec.CommandContext(ctx, xz, "-dc", "--single-stream")
		c.Stdin = bytes.NewReader(data[off:])
	} else if off := bytes.Index(data, []byte(zstdMagic)); off >= 0 {
		zstd, err := exec.LookPath("zstd")
		if err != nil {
			return fmt.Errorf("%w: zstd (the kernel %s is zstd-compressed); install it: apt-get install -y zstd", ErrMissingTool, vmlinuz)
		}
		c = exec.CommandContext(ctx, zstd, "-dc")
		c.Stdin = bytes.NewReader(data[off:])
		tolerateExit = true
	} else {
		return fmt.Errorf("%s: no XZ or zstd stream (only such kernels can be booted through PVH here)", vmlinuz)
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil && (!tolerateExit || ctx.Err() != nil) {
		return fmt.Errorf("decompress %s: %w: %s", vmlinuz, err, tailLines(stderr.String(), 3))
	}
	if !bytes.HasPrefix(stdout.Bytes(), []byte("\x7fELF")) {
		return fmt.Errorf("%s: the compressed payload is not an ELF kernel: %s", vmlinuz, tailLines(stderr.String(), 3))
	}
	return os.WriteFile(out, stdout.Bytes(), 0o644)
}

// lockDir takes an exclusive flock on dir/.lock, waiting while another builder holds it.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	unlock, err = fsutil.Lock(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return nil, fmt.Errorf("vm cache: %w", err)
	}
	return unlock, nil
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
