//go:build linux

// Package microvm boots a throwaway QEMU microVM with a stock Debian kernel that has IPVS, and runs
// one host command inside it.
//
// The host kernel of the bench machine has no IPVS and cannot load modules. The VM gives kpbench
// a kernel that has IPVS, nf_tables, x_tables and ipset as modules. PID 1 is a small busybox
// initramfs (see init.sh). It loads the netfilter and IPVS modules, mounts the host's / read-only
// over virtio-9p with a tmpfs overlay on top, mounts the writable host directories
// (Config.Writable, by default the working directory) at their own paths, chroots into that
// and runs the command. So host binaries (kpbench itself, go test binaries, iptables, nft,
// ipset, ipvsadm) run unchanged against the guest kernel.
//
// A per-run share directory (a fresh temporary directory, removed afterwards) brings the
// command in (run.sh) and brings stdout.log, stderr.log and exit-code back out. Run tails the
// two logs while the VM runs, so output streams. See /work/shared/notes/microvm-recipe.md for
// the measurements behind the choices (TCG, PVH boot of the uncompressed vmlinux with qboot,
// hot /etc files copied into the overlay).
//
// Equivalent to, by hand:
//
//	qemu-system-x86_64 -accel tcg -bios qboot.rom -kernel vmlinux -initrd initramfs.cpio.gz \
//	  -append "console=ttyS0 quiet kpbvm.share=$SHARE" \
//	  -fsdev local,id=hostroot,path=/,readonly=on,... -fsdev local,id=share,path=$SHARE,...
package microvm

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// Defaults of Config, applied by Run and EnsureKernel to the fields left zero.
const (
	// DefaultKernel is the Debian kernel (package linux-image-<version>-amd64) that the
	// recipe was tested with.
	DefaultKernel = "6.1.0-57"
	// DefaultMemoryMB is the guest memory. 768 MB is the minimum for 100k-rule nft restores.
	DefaultMemoryMB = 2048
	// DefaultCPUs is the number of guest CPUs.
	DefaultCPUs = 2
	// DefaultCacheDir holds the downloaded kernels and the built initramfs images.
	DefaultCacheDir = "/var/cache/kpbench/vm"
	// DefaultTimeout bounds one VM run; a hung guest is killed after it.
	DefaultTimeout = 30 * time.Minute
)

// Accelerators of Config.Accel.
const (
	// AccelTCG is QEMU's software emulation: slow (7-9x for kernel programming) but it works
	// everywhere. It is the default.
	AccelTCG = "tcg"
	// AccelKVM uses /dev/kvm. Only when asked for: on the bench machine KVM initialises and
	// then hangs.
	AccelKVM = "kvm"
)

// Environment variables read on the host and set in the guest.
const (
	// EnvAccel chooses the accelerator on the host when Config.Accel is empty; in the guest
	// it says which one was used.
	EnvAccel = "KPBENCH_VM_ACCEL"
	// EnvKernel is set in the guest to the kernel version (Config.Kernel), so results can be
	// labelled.
	EnvKernel = "KPBENCH_VM_KERNEL"
	// EnvInVM is set to 1 in the guest.
	EnvInVM = "KPBENCH_IN_VM"
	// EnvAppend adds blank-separated words to the guest kernel's command line when
	// Config.Append is empty (for experiments: KPBENCH_VM_APPEND="nohz=off").
	EnvAppend = "KPBENCH_VM_APPEND"
	// EnvWritable lists, separated by ':', the host directories the kpbench CLI shares
	// writable when no --writable flag is given.
	EnvWritable = "KPBENCH_VM_WRITABLE"
)

// Config describes one VM. The zero value is usable: every zero field takes its default.
type Config struct {
	// Kernel is the Debian kernel version without the flavour, as in the package name
	// linux-image-<Kernel>-amd64: "6.1.0-57" (default) or "6.12.100+deb12".
	Kernel string
	// MemoryMB is the guest memory in MiB (default 2048).
	MemoryMB int
	// CPUs is the number of guest CPUs (default 2).
	CPUs int
	// CacheDir holds downloaded kernel packages, extracted vmlinux files and initramfs
	// images, keyed by kernel version and init script hash (default /var/cache/kpbench/vm).
	CacheDir string
	// Timeout bounds a whole Run, boot included (default 30m). A guest still running then is
	// killed and Run returns an error.
	Timeout time.Duration
	// Accel is "" (KPBENCH_VM_ACCEL, else tcg), "tcg" or "kvm".
	Accel string
	// Writable lists host directories shared read-write with the guest at the same path, so
	// results written there come back. Empty means the working directory (unless it is /).
	// Everything else the guest writes lands in guest RAM and is lost.
	Writable []string
	// Env adds KEY=VALUE entries to the guest command's environment, after the ones taken
	// from the host (PATH, HOME, GOFLAGS, KPBENCH_*).
	Env []string
	// Debug boots with kernel messages and init's steps on the serial console, and copies the
	// console to Stderr as it comes.
	Debug bool
	// MultiThreadTCG runs the vCPUs on one host thread each (QEMU's default) instead of one
	// thread for all. Debian's 6.12 kernels crash under it ("Oops: int3" when they patch
	// their code, see qemuArgs), so it is off unless asked for; it only matters to guests
	// with several CPUs on a host with idle cores.
	MultiThreadTCG bool
	// Append adds words to the guest kernel's command line (e.g. "nohz=off"), after the
	// ones Run sets. Words must not contain blanks.
	Append []string
	// LogDir, when set, receives the run's logs whatever its outcome: ConsoleLogFile (the
	// whole serial console) and KernelLogFile (the guest kernel's log when the command
	// ended). When empty, the console log is kept only when the guest fails, in a new file
	// under os.TempDir() that the error names.
	LogDir string
	// Stdout receives the guest command's standard output as it runs (nil: discarded).
	Stdout io.Writer
	// Stderr receives the guest command's standard error, and progress of EnsureKernel
	// (nil: discarded).
	Stderr io.Writer
}

// kernelVersionRE is what a Debian kernel ABI version looks like: 6.1.0-57, 6.12.100+deb12.
var kernelVersionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?[-+][0-9A-Za-z.+~-]*[0-9A-Za-z]$`)

// Validate checks cfg as Run would, defaults applied: the kernel version, memory, CPUs,
// timeout, accelerator and Env entries.
func (cfg Config) Validate() error {
	_, err := cfg.withDefaults(os.Getenv)
	return err
}

// withDefaults returns cfg with every zero field set to its default and validates it.
// getenv is os.Getenv in production.
func (cfg Config) withDefaults(getenv func(string) string) (Config, error) {
	if cfg.Kernel == "" {
		cfg.Kernel = DefaultKernel
	}
	if !kernelVersionRE.MatchString(cfg.Kernel) || strings.HasSuffix(cfg.Kernel, "-amd64") {
		return cfg, fmt.Errorf("kernel %q: want a Debian kernel version such as %s (package linux-image-VERSION-amd64), without the -amd64 flavour", cfg.Kernel, DefaultKernel)
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = DefaultMemoryMB
	}
	if cfg.MemoryMB < 256 {
		return cfg, fmt.Errorf("memory %d MiB: want at least 256", cfg.MemoryMB)
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = DefaultCPUs
	}
	if cfg.CPUs < 1 || cfg.CPUs > 64 {
		return cfg, fmt.Errorf("cpus %d: want 1 to 64", cfg.CPUs)
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = DefaultCacheDir
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return cfg, fmt.Errorf("timeout %s: want a positive duration", cfg.Timeout)
	}
	if cfg.Accel == "" {
		cfg.Accel = getenv(EnvAccel)
	}
	if len(cfg.Append) == 0 {
		cfg.Append = strings.Fields(getenv(EnvAppend))
	}
	if cfg.Accel == "" {
		cfg.Accel = AccelTCG
	}
	if cfg.Accel != AccelTCG && cfg.Accel != AccelKVM {
		return cfg, fmt.Errorf("accel %q: want %s or %s", cfg.Accel, AccelTCG, AccelKVM)
	}
	for _, w := range cfg.Append {
		if w == "" || strings.ContainsAny(w, " \t\n") {
			return cfg, fmt.Errorf("kernel parameter %q: want one word without blanks", w)
		}
	}
	for _, e := range cfg.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return cfg, fmt.Errorf("env entry %q: want KEY=VALUE", e)
		}
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	return cfg, nil
}

// Names of the log files Run keeps in Config.LogDir.
const (
	// ConsoleLogFile is the guest's whole serial console: boot messages, panics, init's
	// errors.
	ConsoleLogFile = "vm-console.log"
	// KernelLogFile is the guest kernel's log (dmesg) when the command ended, with init's
	// start and end markers around the command (ScanKernelLog reads it).
	KernelLogFile = "kernel-log.txt"
)

// kernelRelease is the `uname -r` of the guest: the version plus the flavour.
func (cfg Config) kernelRelease() string { return cfg.Kernel + "-amd64" }

// packageName is the Debian package holding the kernel.
func (cfg Config) packageName() string { return "linux-image-" + cfg.kernelRelease() }
