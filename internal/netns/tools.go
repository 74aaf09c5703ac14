//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ToolDirs are the directories, inside a tool root, where a command named without a slash
// is looked for, in order (Debian's root PATH).
func ToolDirs() []string {
	return []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}
}

// Tools says where the external tools that kpbench runs inside one namespace come from:
// the host's own (Root empty, the zero value) or a prepared root directory, such as a
// Debian root of another release holding its nft, iptables, ipset, conntrack and ipvsadm
// (`kpbench tools prepare`). With a root, every tool is resolved inside it and runs
// chrooted into it, inside the namespace: the kernel is the host's, the userspace is the
// root's. A Tools value is cheap to copy and safe for concurrent use.
type Tools struct {
	// NSPath is the namespace the tools run in (/run/netns/<name>).
	NSPath string
	// Root is the tool root directory; empty means the host's /.
	Root string
}

// Exec runs cmd inside t's namespace, from t's root, and waits for it. A non-zero exit is
// an error that carries the tool's stderr.
//
// Equivalent to: `ip netns exec $ns $cmd`, or with a root
// `ip netns exec $ns chroot $root $cmd`.
func (t Tools) Exec(ctx context.Context, cmd Command) (Result, error) {
	if t.Root == "" {
		return Exec(ctx, t.NSPath, cmd)
	}
	resolved, err := t.Resolve(cmd.Path)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", cmd, err)
	}
	var res Result
	err = Do(t.NSPath, func() error {
		var err error
		res, err = execHere(ctx, cmd, resolved, t.Root)
		return err
	})
	return res, err
}

// Resolve returns the path, inside t.Root, of the program name: name itself when it holds a
// slash (an absolute path inside the root), else the first of ToolDirs that has it. The
// path is what a process chrooted into the root executes. With no root it returns name.
func (t Tools) Resolve(name string) (string, error) {
	if t.Root == "" {
		return name, nil
	}
	if strings.Contains(name, "/") {
		if !path.IsAbs(name) {
			return "", fmt.Errorf("tool %q: a path inside tool root %s must be absolute", name, t.Root)
		}
		if _, err := os.Lstat(filepath.Join(t.Root, name)); err != nil {
			return "", fmt.Errorf("tool %s: not in tool root %s: %w", name, t.Root, err)
		}
		return name, nil
	}
	for _, dir := range ToolDirs() {
		// Lstat: a link is resolved by the kernel inside the chroot, where its absolute
		// targets (Debian's /etc/alternatives) point into the root, not the host.
		if st, err := os.Lstat(filepath.Join(t.Root, dir, name)); err == nil && !st.IsDir() {
			return path.Join(dir, name), nil
		}
	}
	return "", fmt.Errorf("tool %s: not found in tool root %s (looked in %s)", name, t.Root, strings.Join(ToolDirs(), ", "))
}

// Do runs fn on a locked OS thread inside t's namespace whose root directory is t.Root,
// for libraries that find and exec their tools themselves (go-iptables looks its binary up
// in PATH and runs it with os/exec): what fn execs is found and runs inside the root. With
// no root it is the package's Do. Either way it first checks that the thread is in a lab
// namespace (Guard): inside a root without /proc, fn could not.
//
// The thread gets a filesystem context of its own (unshare(CLONE_FS)) before chroot, so
// the process's other threads keep the host's root. It is never handed back to other
// goroutines: it goes back to its namespace and the host's root, then exits locked, and
// the runtime destroys it. Goroutines started by fn run on other threads, outside the root
// and the namespace, and paths fn opens itself are inside the root: the root needs a
// /dev/null, which os/exec opens for a child's unset stdin and stdout.
//
// Equivalent to: `ip netns exec $ns chroot $root sh -c "$fn"`.
func (t Tools) Do(fn func() error) error {
	if t.Root == "" {
		return Do(t.NSPath, func() error {
			if err := Guard(); err != nil {
				return err
			}
			return fn()
		})
	}
	if st, err := os.Stat(filepath.Join(t.Root, os.DevNull)); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		// os/exec opens it for every unset stdin and stdout, from the chrooted thread.
		return fmt.Errorf("tool root %s has no %s device: prepare the root as root (mmdebstrap makes it)", t.Root, os.DevNull)
	}
	target, err := vnetns.GetFromPath(t.NSPath)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", t.NSPath, err)
	}
	defer target.Close()
	hostRoot, err := os.Open("/")
	if err != nil {
		return fmt.Errorf("tool root %s: open /: %w", t.Root, err)
	}
	defer hostRoot.Close()
	cwd, err := os.Open(".")
	if err != nil {
		return fmt.Errorf("tool root %s: open the working directory: %w", t.Root, err)
	}
	defer cwd.Close()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread dies when this goroutine returns. It is put back
		// first all the same, because the runtime parks the process's main thread
		// instead of destroying it.
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- fmt.Errorf("netns %s: get current: %w", t.NSPath, err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("tool root %s: unshare the filesystem context: %w", t.Root, err)
			return
		}
		if err := vnetns.Set(target); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", t.NSPath, err)
			return
		}
		ferr := func() error {
			if err := Guard(); err != nil { // before the chroot hides /proc
				return err
			}
			if err := unix.Chroot(t.Root); err != nil {
				return fmt.Errorf("chroot %s: %w", t.Root, err)
			}
			if err := unix.Chdir("/"); err != nil {
				return fmt.Errorf("chroot %s: chdir /: %w", t.Root, err)
			}
			return fn()
		}()
		// Back to the host's root (fchdir to it, chroot "."), then the old working
		// directory and namespace.
		errc <- errors.Join(ferr,
			wrapNonNil("leave tool root "+t.Root, unix.Fchdir(int(hostRoot.Fd()))),
			wrapNonNil("leave tool root "+t.Root, unix.Chroot(".")),
			wrapNonNil("leave tool root "+t.Root, unix.Fchdir(int(cwd.Fd()))),
			wrapNonNil("leave netns "+t.NSPath, vnetns.Set(orig)))
	}()
	return <-errc
}

func wrapNonNil(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
