//go:build linux

package kubestack

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// findProcess returns the pid of the process that runs binary with arg among its
// arguments (a kube-proxy is known by its configuration file, unique per lab and node).
func findProcess(binary, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if runs(pid, binary) && hasArg(pid, arg) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process of %s with argument %s", binary, arg)
}

// runs reports whether pid runs binary (its /proc/<pid>/exe), so that a pid the kernel
// gave to another program since is never taken for ours.
func runs(pid int, binary string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		want = binary
	}
	return exe == want || exe == binary
}

func hasArg(pid int, arg string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	for _, a := range bytes.Split(b, []byte{0}) {
		if string(a) == arg {
			return true
		}
	}
	return false
}

// rss reads a process's VmRSS in bytes.
func rss(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("pid %d VmRSS %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}

// SampleMemory reads the resident memory of the owner and of every process of rec that
// still runs its binary.
func SampleMemory(rec Record) []Memory {
	out := []Memory{memoryOf("kpbench", "", rec.PID, "")}
	for _, p := range rec.Processes {
		out = append(out, memoryOf(p.Component, p.Node, p.PID, p.Binary))
	}
	return out
}

func memoryOf(component, node string, pid int, binary string) Memory {
	m := Memory{Component: component, Node: node, PID: pid}
	if binary != "" && !runs(pid, binary) {
		m.Error = "not running"
		return m
	}
	v, err := rss(pid)
	if err != nil {
		m.Error = err.Error()
	}
	m.RSS = v
	return m
}
