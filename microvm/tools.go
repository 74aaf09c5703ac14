//go:build linux

package microvm

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ErrMissingTool is wrapped by the errors about a host program or file that is not
// installed; the message names the Debian package to install.
var ErrMissingTool = errors.New("missing host tool")

// HostPackages lists the Debian packages the VM needs on the host (for the Makefile's deps
// target): QEMU with qboot, a static busybox for the initramfs, and the tools that unpack the
// kernel and build the initramfs.
func HostPackages() []string {
	return []string{"qemu-system-x86", "busybox-static", "cpio", "kmod", "xz-utils", "binutils"}
}

// tool is a host program and the Debian package that provides it.
type tool struct{ name, pkg string }

// buildTools are the programs EnsureKernel runs.
func buildTools() []tool {
	return []tool{{"apt-get", "apt"}, {"dpkg-deb", "dpkg"}, {"depmod", "kmod"},
		{"xz", "xz-utils"}, {"strip", "binutils"}, {"cpio", "cpio"}, {"busybox", "busybox-static"}}
}

const (
	qemuBinary = "qemu-system-x86_64"
	// qbootROM is the tiny firmware that starts a PVH kernel 0.3 s after QEMU does
	// (SeaBIOS plus a compressed bzImage take 3.6 s under TCG).
	qbootROM = "/usr/share/qemu/qboot.rom"
)

// lookTools resolves every tool on PATH, or says which packages to install.
func lookTools(tools []tool) (map[string]string, error) {
	paths := make(map[string]string, len(tools))
	var missing, pkgs []string
	for _, t := range tools {
		p, err := exec.LookPath(t.name)
		if err != nil {
			missing = append(missing, t.name)
			pkgs = append(pkgs, t.pkg)
			continue
		}
		paths[t.name] = p
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s not found on PATH; install it: apt-get install -y --no-install-recommends %s",
			ErrMissingTool, strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	return paths, nil
}

// checkQboot says which package to install when qboot.rom is missing.
func checkQboot() error {
	if _, err := os.Stat(qbootROM); err != nil {
		return fmt.Errorf("%w: %s: %v; install it: apt-get install -y --no-install-recommends qemu-system-data",
			ErrMissingTool, qbootROM, err)
	}
	return nil
}

// checkStatic refuses a dynamically linked busybox: the initramfs has no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("busybox %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: %s is dynamically linked; the initramfs needs a static one: apt-get install -y busybox-static",
				ErrMissingTool, path)
		}
	}
	return nil
}

// runTool runs a host program and returns its stdout. On failure the error carries the
// command line and the tail of its stderr.
func runTool(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, tailLines(stderr.String(), 10))
	}
	return stdout.Bytes(), nil
}

// tailLines returns the last n lines of s, trimmed.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
