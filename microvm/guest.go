//go:build linux

package microvm

import (
	"fmt"
	"path/filepath"
	"strings"

	"kpbench.dev/kpbench/internal/envlist"
)

// shellQuote quotes s in single quotes for POSIX sh; a single quote inside is closed,
// escaped with a backslash and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// passEnv reports whether a host variable is passed into the guest.
func passEnv(key string) bool {
	switch key {
	case "PATH", "HOME", "GOFLAGS":
		return true
	case EnvInVM, EnvAccel, EnvKernel: // set by Run for the guest
		return false
	}
	return strings.HasPrefix(key, "KPBENCH_")
}

// guestEnv builds the guest command's environment: the host's PATH, HOME, GOFLAGS and
// KPBENCH_* variables, the VM labels (KPBENCH_IN_VM=1, KPBENCH_VM_ACCEL, KPBENCH_VM_KERNEL),
// then extra. A later entry replaces an earlier one with the same key; the order of first
// appearance is kept.
func guestEnv(host []string, cfg Config, extra []string) []string {
	var env envlist.List
	for _, e := range host {
		if k, v, ok := strings.Cut(e, "="); ok && passEnv(k) {
			env.Set(k, v)
		}
	}
	env.Set("TERM", "dumb")
	env.Set(EnvInVM, "1")
	env.Set(EnvAccel, cfg.Accel)
	env.Set(EnvKernel, cfg.Kernel)
	for _, e := range extra {
		if k, v, ok := strings.Cut(e, "="); ok {
			env.Set(k, v)
		}
	}
	return env.Environ()
}

// runScript is the guest's run.sh: it starts with an empty environment (init runs it through
// `env -i`), exports env, changes to dir and execs argv. Exit status 125 means dir does not
// exist in the guest; 127 that argv[0] was not found.
func runScript(dir string, env, argv []string) string {
	var b strings.Builder
	b.WriteString("# written by kpbench microvm\n")
	for _, e := range env {
		fmt.Fprintf(&b, "export %s\n", shellQuote(e))
	}
	fmt.Fprintf(&b, "cd %s || exit 125\n", shellQuote(dir))
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// mountsFile lists the writable shares for init.sh: "TAG PATH" per line.
func mountsFile(dirs []string) string {
	var b strings.Builder
	for i, d := range dirs {
		fmt.Fprintf(&b, "%s %s\n", writableTag(i), d)
	}
	return b.String()
}

// writableTag is the 9p mount tag of the i-th writable directory.
func writableTag(i int) string { return fmt.Sprintf("rw%d", i) }

// writableDirs resolves the directories shared writable: cfg's list, or the working
// directory. It refuses / (the guest would write over the host) and names that init.sh cannot
// read back (newlines, leading or trailing blanks).
func writableDirs(list []string, cwd string) ([]string, error) {
	if len(list) == 0 {
		if cwd == "/" {
			return nil, nil
		}
		list = []string{cwd}
	}
	seen := map[string]bool{}
	var out []string
	for _, d := range list {
		if !filepath.IsAbs(d) {
			d = filepath.Join(cwd, d)
		}
		d = filepath.Clean(d)
		switch {
		case d == "/":
			return nil, fmt.Errorf("writable directory %q: sharing / writable is refused", d)
		case strings.ContainsAny(d, "\n\r") || strings.TrimSpace(d) != d:
			return nil, fmt.Errorf("writable directory %q: newlines and blanks at the ends are not supported", d)
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out, nil
}

// qemuEscape doubles commas, QEMU's option separator.
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// qemuArgs is the QEMU command line booting img with the share and writable directories.
func qemuArgs(cfg Config, img Image, share string, writable []string, debug bool) []string {
	var args []string
	switch cfg.Accel {
	case AccelKVM:
		args = append(args, "-accel", "kvm", "-cpu", "host")
	default:
		// tb-size caps the translation cache (1 GiB by default) at no measured cost.
		//
		// thread=single: one host thread runs every vCPU in turn. With QEMU 7.2's default
		// multi-threaded TCG, Debian's 6.12 kernels die of "Oops: int3" ("Fatal exception in
		// interrupt") when they patch their own code (static keys, text_poke_bp) while
		// another vCPU runs it: a stale translation still holds the int3 after the patch is
		// done. Seen at boot (sched_clock_cpu, run_timer_softirq) in 2 of 50 boots, and in
		// 4 of 6 guests that flipped the sched_schedstats key 400 times while forking; 0 of
		// 6 for 6.1.0-57, and 0 of 4 for 6.12 with thread=single, which was also faster on
		// this loaded 2-core machine (a 6.1 ipvs check: 20-21 s against 25-33 s).
		tcg := "tcg,thread=single,tb-size=256"
		if cfg.MultiThreadTCG {
			tcg = "tcg,thread=multi,tb-size=256"
		}
		args = append(args, "-accel", tcg, "-cpu", "max")
	}
	// log_buf_len: a ring buffer large enough for the whole run's kernel log, which init
	// saves when the command ends (warnings and soft lockups are counted from it).
	// no_timer_check: the kernel's boot-time check that the IO-APIC timer ticks times out
	// under TCG on a busy host and panics ("IO-APIC + timer doesn't work!", 1 of 50 boots
	// of 6.12.118 here); the emulated timer is known to work.
	appendArgs := "console=ttyS0 panic=-1 mitigations=off cryptomgr.notests no_timer_check log_buf_len=4M kpbvm.share=" + share
	if debug {
		appendArgs += " loglevel=7 kpbvm.debug=1"
	} else {
		appendArgs += " quiet"
	}
	if len(cfg.Append) > 0 {
		appendArgs += " " + strings.Join(cfg.Append, " ")
	}
	args = append(args,
		"-smp", fmt.Sprint(cfg.CPUs), "-m", fmt.Sprint(cfg.MemoryMB),
		"-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-bios", qbootROM, "-kernel", img.Vmlinux, "-initrd", img.Initramfs,
		"-append", appendArgs,
		"-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
		"-fsdev", "local,id=share,path="+qemuEscape(share)+",security_model=none,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=share,mount_tag=share",
	)
	for i, d := range writable {
		tag := writableTag(i)
		args = append(args,
			"-fsdev", "local,id="+tag+",path="+qemuEscape(d)+",security_model=none,multidevs=remap",
			"-device", "virtio-9p-pci,fsdev="+tag+",mount_tag="+tag)
	}
	return args
}
