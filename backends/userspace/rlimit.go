//go:build linux

package userspace

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"kpbench.dev/kpbench/backends"
)

// wantOpenFiles is the open-file limit the proxy asks for: one listener per service port,
// plus two sockets per proxied connection. kube-proxy's userspace mode raised its limit
// too (to 64,000).
const wantOpenFiles = 1 << 20

// raiseOpenFiles raises this process's RLIMIT_NOFILE (soft and, when allowed, hard) to
// wantOpenFiles, capped by the kernel's fs.nr_open. Without it a node with 20,000 service
// ports runs out of descriptors (a typical hard limit is 20,000 or less). The limit is
// process-wide and only ever raised; an unprivileged process keeps what it may have.
//
// Equivalent to: `ulimit -n 1048576`.
func raiseOpenFiles() error {
	want := uint64(wantOpenFiles)
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n < want {
			want = n
		}
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("get open-file limit: %w", err)
	}
	if lim.Cur >= want {
		return nil
	}
	next := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		// Not allowed to raise the hard limit: take the soft one up to it.
		next = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err2 := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err2 != nil {
			return fmt.Errorf("raise open-file limit to %d: %w", want, err)
		}
	}
	return nil
}

// descriptorReserve is what checkDescriptors keeps free beyond the listeners: proxied
// connections (two descriptors each), the tools the bench runs, the probes.
const descriptorReserve = 1024

// checkDescriptors refuses, with backends.ErrMachineLimit, to open n more listeners when
// the process's open-file limit cannot hold them plus descriptorReserve: at the limit
// every listen fails with EMFILE, and so would every retry.
func checkDescriptors(n int) error {
	if n == 0 {
		return nil
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("get open-file limit: %w", err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("count open files: %w", err)
	}
	if uint64(len(fds)+n+descriptorReserve) > lim.Cur {
		return fmt.Errorf("%w: one listener per service port needs %d more open files, and %d of the limit of %d are in use (%d kept free for connections); raising it takes CAP_SYS_RESOURCE or a higher hard limit (ulimit -Hn)",
			backends.ErrMachineLimit, n, len(fds), lim.Cur, descriptorReserve)
	}
	return nil
}
