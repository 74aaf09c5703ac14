//go:build linux

package kubelet

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// PodExecCommand is the hidden subcommand of kpbench that runs a command of `kubectl exec`
// inside a pod (RunPodExec). The kubelet starts it as a child of its own binary.
const PodExecCommand = "__podexec"

// Exit codes of a command that could not be run, as a shell and a container runtime give
// them: found but not executable, and not found.
const (
	ExitCodeCannotExecute = 126
	ExitCodeNotFound      = 127
)

// podExecSpec is what the exec helper is told: where it runs, and the pod's files.
type podExecSpec struct {
	// NetNS is the path of the pod's network namespace (the node's for hostNetwork).
	NetNS string
	// Hostname is the pod's hostname.
	Hostname string
	// Root is an empty directory the helper mounts its private root on.
	Root string
	// Dir is where the command starts ("" for /).
	Dir string
	// Binds are files mounted over paths of the pod's root: /etc/resolv.conf, /etc/hosts,
	// /etc/hostname and /agnhost, source first.
	Binds [][2]string
	// Argv is the command and its arguments.
	Argv []string
}

// args renders the spec as the helper's arguments (after PodExecCommand).
func (s podExecSpec) args() []string {
	a := []string{"--netns=" + s.NetNS, "--hostname=" + s.Hostname, "--root=" + s.Root}
	if s.Dir != "" {
		a = append(a, "--dir="+s.Dir)
	}
	for _, b := range s.Binds {
		a = append(a, "--bind="+b[0]+":"+b[1])
	}
	return append(append(a, "--"), s.Argv...)
}

// parsePodExecSpec reads the helper's arguments.
func parsePodExecSpec(args []string) (podExecSpec, error) {
	var s podExecSpec
	fs := flag.NewFlagSet(PodExecCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&s.NetNS, "netns", "", "network namespace path")
	fs.StringVar(&s.Hostname, "hostname", "", "hostname")
	fs.StringVar(&s.Root, "root", "", "empty directory for the private root")
	fs.StringVar(&s.Dir, "dir", "", "working directory")
	fs.Func("bind", "SRC:DST, a file mounted over DST", func(v string) error {
		src, dst, ok := strings.Cut(v, ":")
		if !ok || !filepath.IsAbs(src) || !filepath.IsAbs(dst) {
			return fmt.Errorf("--bind %q: want /SRC:/DST", v)
		}
		s.Binds = append(s.Binds, [2]string{src, dst})
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	s.Argv = fs.Args()
	switch {
	case s.NetNS == "" || s.Root == "" || s.Hostname == "":
		return s, errors.New("--netns, --root and --hostname are required")
	case len(s.Argv) == 0:
		return s, errors.New("no command")
	}
	return s, nil
}

// RunPodExec is the exec helper (`kpbench __podexec`): it runs in new mount and UTS
// namespaces that the kubelet created for it (clone flags), enters the pod's network
// namespace, builds the pod's view of the files and replaces itself with the command, so
// that the command's argv, environment, standard streams and exit status are the
// container's. It returns only when the command could not be started: the exit code to
// use (ExitCodeNotFound, ExitCodeCannotExecute, or 1 when the pod's view could not be made),
// after saying why on stderr.
//
// The pod's view: the host's root, every top-level directory bound (recursively) under a
// private tmpfs root but /sys, a sysfs of the pod's network namespace, with the pod's /etc/resolv.conf, /etc/hosts and /etc/hostname bound
// over the host's, /agnhost when the kubelet has one, and the pod's hostname. Mounts are
// made slaves first, so nothing made here reaches the host's mount namespace, while the
// host's later mounts (and unmounts, of a deleted namespace) still reach this one.
//
// Equivalent to: `unshare --mount --uts --propagation slave sh -c 'mount -t tmpfs none $root;
// for d in /*; do mount --rbind $d $root$d; done; mount --bind $pod/resolv.conf
// $root/etc/resolv.conf; ...; hostname $pod; exec nsenter --net=$netns chroot $root $cmd'`.
func RunPodExec(args []string, stderr io.Writer) int {
	spec, err := parsePodExecSpec(args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", PodExecCommand, err)
		return 1
	}
	// setns(CLONE_NEWNET) moves only this thread, and exec keeps only this thread: both
	// must happen on it.
	runtime.LockOSThread()
	if err := enterPod(spec); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", PodExecCommand, err)
		return 1
	}
	path, err := exec.LookPath(spec.Argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "exec: %q: executable file not found in $PATH\n", spec.Argv[0])
		return ExitCodeNotFound
	}
	err = syscall.Exec(path, spec.Argv, os.Environ())
	fmt.Fprintf(stderr, "exec %q: %v\n", spec.Argv[0], err)
	if errors.Is(err, syscall.ENOENT) {
		return ExitCodeNotFound
	}
	return ExitCodeCannotExecute
}

// enterPod makes the pod's view (see RunPodExec) for the calling thread, which must be
// locked.
func enterPod(s podExecSpec) error {
	netNS, err := unix.Open(s.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", s.NetNS, err)
	}
	defer unix.Close(netNS)
	// First: the sysfs mounted below shows the interfaces of the mounter's namespace.
	if err := unix.Setns(netNS, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter %s: %w", s.NetNS, err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts slaves (a mount namespace of our own is needed): %w", err)
	}
	if err := unix.Mount("kpbench-pod", s.Root, "tmpfs", unix.MS_NOSUID, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", s.Root, err)
	}
	entries, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	for _, e := range entries {
		src, dst := "/"+e.Name(), filepath.Join(s.Root, e.Name())
		switch {
		case e.Type()&os.ModeSymlink != 0: // /bin -> usr/bin
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case e.IsDir() && src == "/sys":
			// A sysfs of the pod's namespace (/sys/class/net lists its interfaces), as a
			// container runtime mounts it.
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
			if err := unix.Mount("sysfs", dst, "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("sysfs: %w", err)
			}
		case e.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
			if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s: %w", src, err)
			}
		case e.Type().IsRegular():
			if err := bindFile(src, dst, true); err != nil {
				return err
			}
		}
	}
	// The bind of the top-level directory holding Root copied Root's tmpfs into itself.
	_ = unix.Unmount(filepath.Join(s.Root, s.Root), unix.MNT_DETACH)
	if err := unix.Chroot(s.Root); err != nil {
		return fmt.Errorf("chroot %s: %w", s.Root, err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	for _, b := range s.Binds {
		if err := bindFile(b[0], b[1], filepath.Dir(b[1]) == "/"); err != nil {
			return err
		}
	}
	if s.Dir != "" {
		if err := os.Chdir(s.Dir); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return fmt.Errorf("hostname %s (a UTS namespace of our own is needed): %w", s.Hostname, err)
	}
	return nil
}

// bindFile mounts the file src over dst. A missing dst is created only when create says
// so: in the private root's own tmpfs (/agnhost), never on the host's disk.
func bindFile(src, dst string, create bool) error {
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		if !create {
			return fmt.Errorf("bind %s: %s does not exist", src, dst)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, dst, err)
		}
		_ = f.Close()
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	return nil
}

// RunPodExecIfAsked runs the exec helper and exits when this process was started as one
// (its first argument is PodExecCommand). The kubelet starts its own executable as the
// helper: a test binary that starts lab kubelets calls this first in its TestMain, as
// kpbench's main dispatches the hidden subcommand.
func RunPodExecIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == PodExecCommand {
		os.Exit(RunPodExec(os.Args[2:], os.Stderr))
	}
}
