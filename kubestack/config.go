package kubestack

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/lab"
)

// ErrBadConfig is wrapped by every refusal of Config.Validate and of a proxy mode the
// kernel cannot run: bad input (the command line exits 2), found before anything is built.
var ErrBadConfig = errors.New("bad cluster configuration")

// MaxNodes bounds a cluster's nodes: each runs a kube-proxy process (~40 MB) beside the
// control plane, on a machine shared with others.
const MaxNodes = 16

// Config describes a cluster. Zero fields take the documented defaults.
type Config struct {
	// Name names the cluster and its lab: 1-10 characters of a-z and 0-9.
	Name string
	// Nodes is the number of nodes (default 2, at most MaxNodes).
	Nodes int
	// Clients is the number of external client hosts on the fabric (for NodePort traffic
	// from outside the cluster). 0 is allowed.
	Clients int
	// Proxy is kube-proxy's mode: iptables, nftables or ipvs (IPVS only where the kernel
	// has it).
	Proxy kubeproxy.Mode
	// Port is the loopback port of the API forward (0: a free one).
	Port int
	// KubeProxyBinary is a kube-proxy binary to run instead of the one `make upstream`
	// built (e.g. a pull request's build); empty for that one.
	KubeProxyBinary string
	// MinSyncPeriod is kube-proxy's minSyncPeriod (default 1s, kube-proxy's own default).
	MinSyncPeriod time.Duration
	// Dir is the cluster registry's directory (default DefaultDir); LabRegistryDir the
	// lab registry's (default lab.DefaultRegistryDir).
	Dir, LabRegistryDir string
	// StartTimeout bounds each wait of `cluster up` (default 3 minutes).
	StartTimeout time.Duration
}

// Default fills unset fields.
func (c *Config) Default() {
	if c.Nodes == 0 {
		c.Nodes = 2
	}
	if c.Proxy == "" {
		c.Proxy = kubeproxy.ModeNFTables
	}
	if c.MinSyncPeriod == 0 {
		c.MinSyncPeriod = time.Second
	}
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.LabRegistryDir == "" {
		c.LabRegistryDir = lab.DefaultRegistryDir
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 3 * time.Minute
	}
}

// Validate checks the configuration (defaults applied), naming the bad field.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadConfig, fmt.Sprintf(format, args...))
	}
	labCfg := c.labConfig()
	labCfg.Default()
	if err := labCfg.Validate(); err != nil {
		return bad("%v", err)
	}
	switch {
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return bad("nodes: %d is out of range 1-%d", c.Nodes, MaxNodes)
	case c.Port < 0 || c.Port > 65535:
		return bad("port: %d is out of range 0-65535", c.Port)
	case c.MinSyncPeriod < 0:
		return bad("kube-proxy minSyncPeriod: %s is negative", c.MinSyncPeriod)
	}
	if c.KubeProxyBinary != "" {
		if st, err := os.Stat(c.KubeProxyBinary); err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return bad("kube-proxy binary %s: not an executable file", c.KubeProxyBinary)
		}
	}
	if !c.Proxy.Valid() {
		modes := make([]string, 0, len(kubeproxy.Modes()))
		for _, m := range kubeproxy.Modes() {
			modes = append(modes, string(m))
		}
		return bad("proxy %q: allowed values are %s", c.Proxy, strings.Join(modes, ", "))
	}
	return nil
}

// labConfig is the lab a cluster is built on: its nodes and clients, no pods (the lab
// kubelets make them), the lab's default addressing.
func (c *Config) labConfig() lab.Config {
	return lab.Config{Name: c.Name, Nodes: c.Nodes, Clients: c.Clients}
}
