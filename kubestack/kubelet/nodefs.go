//go:build linux

package kubelet

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"kpbench.dev/kpbench/lab"
)

// readMachine reads the CPU count, /proc/meminfo's MemTotal (as the lab reads its limits)
// and the kernel release.
func readMachine() (machine, error) {
	m := machine{cpus: runtime.NumCPU()}
	lm, err := lab.ReadMachine()
	if err != nil {
		return m, err
	}
	m.memory = int64(lm.MemTotal)
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return m, fmt.Errorf("machine: %w", err)
	}
	m.kernel = strings.TrimSpace(string(rel))
	return m, nil
}

// nodeFSBytes is the size of the filesystem that holds dir (the kubelet's state
// directory), as a kubelet reports the capacity of its nodefs: statfs's blocks times the
// fragment size.
func nodeFSBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("node filesystem: statfs %s: %w", dir, err)
	}
	return int64(st.Blocks) * fsUnit(&st), nil
}

// fsUnit is the unit statfs counts blocks in: the fragment size, or the block size on a
// filesystem that reports none.
func fsUnit(st *unix.Statfs_t) int64 {
	if st.Frsize > 0 {
		return st.Frsize
	}
	return st.Bsize
}
