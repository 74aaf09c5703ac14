package toolroot

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"kpbench.dev/kpbench/internal/fsutil"
)

// EnvInVM is set to 1 inside kpbench's microVM (microvm), where the cache is the host's,
// seen through a RAM overlay: prepared roots can be used there, not built.
const EnvInVM = "KPBENCH_IN_VM"

// distro builds the roots of one distribution.
type distro struct {
	// command returns the command line that builds a root of spec at dir from mirror.
	command func(s Spec, mirror, dir string) []string
	// hostPackage is the Debian package that provides command's program on the host.
	hostPackage string
}

// distros is the registry of distributions Prepare can build.
func distros() map[string]distro {
	return map[string]distro{
		"debian": {command: mmdebstrapCommand, hostPackage: "mmdebstrap"},
	}
}

// Distros lists the distribution names Parse accepts, sorted.
func Distros() []string {
	var out []string
	for d := range distros() {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// mmdebstrapCommand builds a Debian root of the essential packages plus Packages(): no apt,
// no init, about 110 MB.
//
// Equivalent to: mmdebstrap --variant=essential --include=nftables,iptables,... trixie DIR "deb MIRROR trixie main"
func mmdebstrapCommand(s Spec, mirror, dir string) []string {
	return []string{"mmdebstrap", "--variant=essential", "--include=" + strings.Join(Packages(), ","),
		s.Suite, dir, fmt.Sprintf("deb %s %s main", mirror, s.Suite)}
}

// PrepareOptions tune Prepare. The zero value is the default.
type PrepareOptions struct {
	// Mirror is the Debian archive to build from ("" means the one the host's apt sources
	// name, else DefaultMirror).
	Mirror string
	// Progress receives the builder's output and Prepare's steps (nil: discarded).
	Progress io.Writer
	// run runs a build command; nil means runCommand. Tests replace it.
	run func(ctx context.Context, argv []string, progress io.Writer) error
	// readVersions describes a built root; nil means ReadVersions. Tests replace it.
	readVersions func(ctx context.Context, dir string) (Versions, error)
	// etcApt is the apt configuration directory read for the mirror ("" means /etc/apt).
	etcApt string
}

// Prepare returns the root of s, building it first when the cache does not hold it: the
// distribution's packages (Packages) installed with mmdebstrap from the host's Debian mirror
// into a temporary directory of the cache, checked (its nft must run), described
// (info.json), and renamed into place, so a crash leaves no half root; a lock file
// serialises builders of the same root, and a second caller waits and reuses the first's
// root. mmdebstrap is installed with apt-get when missing. The host needs no preparation:
// Prepare(Host) returns at once.
func (c Cache) Prepare(ctx context.Context, s Spec, opts PrepareOptions) (Root, error) {
	if s.IsHost() {
		return Root{Spec: s, Dir: "/"}, nil
	}
	if r, err := c.Resolve(s); err == nil {
		return r, nil
	}
	d, ok := distros()[s.Distro]
	if !ok {
		return Root{}, fmt.Errorf("tools %s: unknown distribution %q", s, s.Distro)
	}
	if os.Getenv(EnvInVM) == "1" {
		return Root{}, fmt.Errorf("tools %s: not prepared, and roots are built on the host, not in the microVM: run kpbench tools prepare %s on the host", s, s)
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	run := opts.run
	if run == nil {
		run = runCommand
	}
	readVersions := opts.readVersions
	if readVersions == nil {
		readVersions = ReadVersions
	}
	if err := os.MkdirAll(c.dir(), 0o755); err != nil {
		return Root{}, fmt.Errorf("tools cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(c.dir(), ".lock-"+s.ID()))
	if err != nil {
		return Root{}, err
	}
	defer unlock()
	// Another builder may have finished while we waited for the lock.
	if r, err := c.Resolve(s); err == nil {
		return r, nil
	}
	if err := c.removeStale(s); err != nil {
		return Root{}, err
	}
	if opts.run == nil {
		if err := ensureHostTool(ctx, d, progress); err != nil {
			return Root{}, fmt.Errorf("tools %s: %w", s, err)
		}
	}
	mirror := opts.Mirror
	if mirror == "" {
		etc := opts.etcApt
		if etc == "" {
			etc = "/etc/apt"
		}
		mirror = hostMirror(etc)
	}
	tmp, err := os.MkdirTemp(c.dir(), ".tmp-"+s.ID()+"-")
	if err != nil {
		return Root{}, fmt.Errorf("tools cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Root{}, fmt.Errorf("tools cache: %w", err)
	}
	argv := d.command(s, mirror, filepath.Join(tmp, rootName))
	fmt.Fprintf(progress, "kpbench tools: building %s: %s\n", s, strings.Join(argv, " "))
	start := time.Now()
	if err := run(ctx, argv, progress); err != nil {
		return Root{}, fmt.Errorf("tools %s: build: %w", s, err)
	}
	took := time.Since(start)
	versions, err := readVersions(ctx, filepath.Join(tmp, rootName))
	if err != nil {
		return Root{}, fmt.Errorf("tools %s: the built root does not work: %w", s, err)
	}
	// info.json names the root's final path, where the build's temporary one is renamed.
	info := Info{Spec: s.String(), Mirror: mirror, Command: d.command(s, mirror, c.RootDir(s)), Prepared: time.Now().UTC(), Took: took,
		Bytes: diskUsage(filepath.Join(tmp, rootName)), Versions: versions}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return Root{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, infoName), append(b, '\n'), 0o644); err != nil {
		return Root{}, fmt.Errorf("tools cache: %w", err)
	}
	if err := os.Rename(tmp, c.EntryDir(s)); err != nil {
		return Root{}, fmt.Errorf("tools cache: install %s: %w", c.EntryDir(s), err)
	}
	fmt.Fprintf(progress, "kpbench tools: prepared %s in %s: %s (%d MB)\n", s, took.Round(time.Second), c.RootDir(s), info.Bytes>>20)
	return c.Resolve(s)
}

// removeStale removes the builds of s that a crashed builder left (the lock is held). It
// refuses when something is mounted below one, rather than delete through a mount.
func (c Cache) removeStale(s Spec) error {
	stale, _ := filepath.Glob(filepath.Join(c.dir(), ".tmp-"+s.ID()+"-*"))
	stale = append(stale, c.EntryDir(s)) // an entry without info.json or root
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	for _, dir := range stale {
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		for _, m := range mounts {
			if m == dir || strings.HasPrefix(m, dir+"/") {
				return fmt.Errorf("tools cache: %s is mounted below the unfinished build %s; unmount it (umount -R %s) and retry", m, dir, m)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("tools cache: remove the unfinished build %s: %w", dir, err)
		}
	}
	return nil
}

// mountPoints lists the mount points of this process's mount namespace.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mounts: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes of blanks ("\040").
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// runCommand runs argv in a private mount namespace, so that the mounts mmdebstrap makes in
// the root it builds (proc, sys, dev) vanish with it, even when it crashes. Its output goes
// to progress.
func runCommand(ctx context.Context, argv []string, progress io.Writer) error {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdout, c.Stderr = progress, progress
	// Go makes / private (MS_REC|MS_PRIVATE) in the child when it unshares the mount
	// namespace, so nothing propagates back to the host's.
	c.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	c.WaitDelay = 10 * time.Second
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// ensureHostTool installs the distribution's builder (mmdebstrap) with apt-get when it is
// not on PATH.
func ensureHostTool(ctx context.Context, d distro, progress io.Writer) error {
	name := d.hostPackage
	if _, err := exec.LookPath(name); err == nil {
		return nil
	}
	fmt.Fprintf(progress, "kpbench tools: %s is missing, installing it: apt-get install -y --no-install-recommends %s\n", name, d.hostPackage)
	install := func() error {
		c := exec.CommandContext(ctx, "apt-get", "install", "-y", "-q", "--no-install-recommends", d.hostPackage)
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		c.Stdout, c.Stderr = progress, progress
		return c.Run()
	}
	if err := install(); err != nil {
		upd := exec.CommandContext(ctx, "apt-get", "update", "-q")
		upd.Stdout, upd.Stderr = progress, progress
		if uerr := upd.Run(); uerr != nil {
			return fmt.Errorf("install %s: %w (and apt-get update: %v)", d.hostPackage, err, uerr)
		}
		if err := install(); err != nil {
			return fmt.Errorf("install %s: %w", d.hostPackage, err)
		}
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%s installed but not on PATH: %w", name, err)
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting while another builder holds it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	unlock, err = fsutil.Lock(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("tools cache: %w", err)
	}
	return unlock, nil
}

// diskUsage is the size of the regular files below dir (symlinks and hard links counted as
// they appear).
func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
