//go:build unix

package reports

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"kpbench.dev/kpbench/internal/version"
)

// CollectEnvironment describes the machine this process runs on: uname, the versions
// `iptables --version`, `iptables-restore --version` and `nft --version` print (the
// host's: SetTools replaces them when the backends run a tool root), runtime.NumCPU, MemTotal from
// /proc/meminfo, the build's commit and Go version. It only reads: it runs no tool that
// changes anything, and it never fails (what cannot be read is left empty). The tools
// are run with a 5 s timeout each.
//
// Accelerator is "tcg" when /proc/cpuinfo names a QEMU emulated CPU, "kvm" when the CPU
// has the hypervisor flag, "native" otherwise; a microVM runner that knows better should
// overwrite it.
func CollectEnvironment(ctx context.Context) Environment {
	env := Environment{
		Cores:         runtime.NumCPU(),
		GoVersion:     runtime.Version(),
		KpbenchCommit: buildCommit(),
		Date:          time.Now().UTC(),
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		env.Kernel = unix.ByteSliceToString(u.Sysname[:])
		env.KernelRelease = unix.ByteSliceToString(u.Release[:])
	}
	env.Hostname, _ = os.Hostname()
	env.IPTablesVersion = toolVersion(ctx, "iptables", "--version")
	env.NFTVersion = toolVersion(ctx, "nft", "--version")
	env.IPTablesRestoreVersion = toolVersion(ctx, "iptables-restore", "--version")
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		env.MemoryBytes = memTotal(data)
	}
	// "native" unless kpbench runs inside its own microVM (microvm), which says how it is
	// accelerated; the bench host being a VM itself is part of "the machine", not of the
	// comparison the field exists for (TCG results are several times slower).
	env.Accelerator = "native"
	if os.Getenv("KPBENCH_IN_VM") == "1" {
		env.Accelerator = os.Getenv("KPBENCH_VM_ACCEL")
		if data, err := os.ReadFile("/proc/cpuinfo"); err == nil && env.Accelerator == "" {
			env.Accelerator = accelerator(data)
		}
		if k := os.Getenv("KPBENCH_VM_KERNEL"); k != "" {
			env.KernelRelease += " (microVM kernel " + k + ")"
		}
	}
	return env
}

// SetTools records the userspace tools the backends run: spec ("host" or
// "debian:trixie"), the root directory ("" for the host's) and, for a root, the first
// lines of its tools' --version keyed by tool name ("nft", "iptables",
// "iptables-restore"), which replace the host's that CollectEnvironment read: a tool
// missing from versions is left empty, so that no figure is credited to the host's tools
// by mistake. With no root the host's versions stay.
func (e *Environment) SetTools(spec, root string, versions map[string]string) {
	e.Tools, e.ToolRoot = spec, root
	if root == "" {
		return
	}
	e.NFTVersion = versions["nft"]
	e.IPTablesVersion = versions["iptables"]
	e.IPTablesRestoreVersion = versions["iptables-restore"]
}

// buildCommit is the commit stamped by the Makefile, else the one the Go toolchain
// recorded, else "unknown".
func buildCommit() string {
	if version.Commit != "" && version.Commit != "unknown" {
		return version.Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// toolVersion runs `name args...` and returns the first line of its output, or "" when the
// tool is missing or fails.
func toolVersion(ctx context.Context, name string, args ...string) string {
	path, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).Output()
	if err != nil {
		return ""
	}
	line, _, _ := bytes.Cut(out, []byte("\n"))
	return strings.TrimSpace(string(line))
}

// memTotal parses the MemTotal line of /proc/meminfo ("MemTotal:  2014436 kB") into bytes.
func memTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			if len(f) >= 3 && f[2] == "kB" {
				v *= 1024
			}
			return v
		}
	}
	return 0
}

// accelerator guesses how the CPU is provided from /proc/cpuinfo.
func accelerator(cpuinfo []byte) string {
	s := string(cpuinfo)
	switch {
	case strings.Contains(s, "QEMU Virtual CPU") || strings.Contains(s, "QEMU TCG"):
		return "tcg"
	case hasFlag(s, "hypervisor"):
		return "kvm"
	default:
		return "native"
	}
}

func hasFlag(cpuinfo, flag string) bool {
	for line := range strings.SplitSeq(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "flags" && strings.Contains(" "+v+" ", " "+flag+" ") {
			return true
		}
	}
	return false
}
