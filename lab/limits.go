//go:build linux

package lab

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Limits of one lab, whatever the machine; checked before anything is created. Scenario
// files are bounded by these (scenarios' Max* constants are these).
const (
	// MaxNodes is the most nodes of a lab (node i is .10+i on the fabric).
	MaxNodes = 64
	// MaxClients is the most external clients (client j is .200+j on the fabric).
	MaxClients = 32
	// MaxPodsPerNode is the most pods one node holds (its pod block grows past a /24).
	MaxPodsPerNode = 4000
	// MaxPods is the most pods of a lab.
	MaxPods = 20000
	// MaxNodeCIDRBits is the longest prefix of the fabric: the addressing plan needs a
	// /24 (nodes from .10, clients from .200).
	MaxNodeCIDRBits = 24
)

// NodeBlockBits returns the prefix length of each node's pod block for cfg (a /24, or
// larger for more pods), or why the pod CIDR cannot hold the nodes' blocks.
func (c *Config) NodeBlockBits() (int, error) { return c.nodeBlockBits() }

// What one host of a lab costs the machine, for CheckMachine. Conservative estimates:
//   - memory: a network namespace with its veth pair, bridge port, sysctl tree, routes and
//     netfilter tables, plus the echo server's goroutines and buffers (512 KiB);
//   - file descriptors: one listener per pod port (8080/tcp and 8080/udp by default); the
//     process keeps reserveFDs for itself (registry, logs, exec'd tools' pipes, netlink
//     sockets, probes).
const (
	hostMemory = 512 << 10
	reserveFDs = 256
)

// ErrMachineLimit is wrapped by every refusal of Check: the request is bad input for this
// machine (the command line exits 2).
var ErrMachineLimit = errors.New("exceeds what this machine can hold")

// Machine is what this machine can hold, read from the kernel before a lab is created.
type Machine struct {
	// MemTotal is /proc/meminfo's MemTotal, in bytes: the memory a lab kubelet reports as
	// its node's capacity.
	MemTotal uint64
	// MemAvailable is /proc/meminfo's MemAvailable, in bytes.
	MemAvailable uint64
	// OpenFiles is the hard RLIMIT_NOFILE (the Go runtime raises the soft limit to it).
	OpenFiles uint64
	// NetNamespaces is /proc/sys/user/max_net_namespaces.
	NetNamespaces uint64
}

// ReadMachine reads the machine's limits.
func ReadMachine() (Machine, error) {
	var m Machine
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return m, fmt.Errorf("machine limits: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	fields := map[string]*uint64{"MemTotal": &m.MemTotal, "MemAvailable": &m.MemAvailable}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[0], ":")
		if field, ok := fields[name]; ok {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return m, fmt.Errorf("machine limits: /proc/meminfo %s %q: %w", name, f[1], err)
			}
			*field = kb << 10
		}
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return m, fmt.Errorf("machine limits: RLIMIT_NOFILE: %w", err)
	}
	m.OpenFiles = rl.Max
	b, err := os.ReadFile("/proc/sys/user/max_net_namespaces")
	if err != nil {
		return m, fmt.Errorf("machine limits: %w", err)
	}
	if m.NetNamespaces, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return m, fmt.Errorf("machine limits: /proc/sys/user/max_net_namespaces: %w", err)
	}
	return m, nil
}

// Check refuses a lab of cfg (defaults applied) that this machine cannot hold, naming the
// limit: network namespaces (one per host plus the fabric), open files (listeners), and
// memory (at most three quarters of MemAvailable). It is called before anything is created.
func (m Machine) Check(cfg Config) error {
	pods := uint64(cfg.Nodes) * uint64(max(cfg.PodsPerNode, 0))
	hosts := uint64(cfg.Nodes) + uint64(max(cfg.Clients, 0)) + pods + 1
	if hosts > m.NetNamespaces {
		return fmt.Errorf("lab %s: %d network namespaces needed, the machine allows %d (/proc/sys/user/max_net_namespaces): %w", cfg.Name, hosts, m.NetNamespaces, ErrMachineLimit)
	}
	fds := pods*uint64(len(cfg.DefaultPodPorts)) + reserveFDs
	if fds > m.OpenFiles {
		return fmt.Errorf("lab %s: about %d open files needed for %d pods (a listener per pod port, %d reserved), the limit is %d (RLIMIT_NOFILE; raise it with ulimit -Hn): %w", cfg.Name, fds, pods, reserveFDs, m.OpenFiles, ErrMachineLimit)
	}
	if mem := hosts * hostMemory; mem > m.MemAvailable/4*3 {
		return fmt.Errorf("lab %s: about %d MiB needed for %d hosts (512 KiB each), more than 3/4 of the %d MiB available (/proc/meminfo MemAvailable): %w", cfg.Name, mem>>20, hosts, m.MemAvailable>>20, ErrMachineLimit)
	}
	return nil
}

// CheckMachine reads the machine's limits and checks cfg against them.
func CheckMachine(cfg Config) error {
	m, err := ReadMachine()
	if err != nil {
		return err
	}
	return m.Check(cfg)
}
