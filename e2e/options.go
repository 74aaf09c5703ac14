//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/kubestack"
)

// ErrBadInput is wrapped by every refusal of Options.Validate: the command line exits 2,
// before anything is built.
var ErrBadInput = errors.New("bad e2e options")

// AlwaysSkip is skipped on every run, whatever the user's --skip: [Serial] specs want the
// cluster to themselves and [Disruptive] ones restart components (as upstream's parallel
// jobs skip them).
const AlwaysSkip = `\[Serial\]|\[Disruptive\]`

// DefaultFocus is the suite `kpbench e2e` runs unless told otherwise.
const DefaultFocus = `\[sig-network\] Services`

// DefaultParallel is Options.Parallel's default: the specs mostly wait (for pods, for
// traffic to pass or not), so more processes than cores pay off; MaxParallel bounds it.
const (
	DefaultParallel = 4
	MaxParallel     = 25
)

// MaxBackgroundServices bounds --background-services: each is a Service and an
// EndpointSlice that every kube-proxy programs.
const MaxBackgroundServices = 20000

// DefaultNodes is the node count of a run's clusters: the Services suite's most demanding
// test (NodePort and HealthCheckNodePort when externalTrafficPolicy changes) needs 3
// schedulable nodes; a dozen others need 2.
const DefaultNodes = 3

// Options describe a `kpbench e2e` run. Zero fields take the documented defaults.
type Options struct {
	// Modes are kube-proxy's modes, one cluster and one run each, in this order.
	Modes []kubeproxy.Mode
	// KubeProxy is a kube-proxy binary to run instead of the one `make upstream` built.
	KubeProxy string
	// Nodes is each cluster's node count (default DefaultNodes).
	Nodes int
	// Focus selects the specs (default DefaultFocus); Skip leaves some out, beside
	// AlwaysSkip. Both are ginkgo's (Go) regular expressions over the spec's full text.
	Focus, Skip string
	// BackgroundServices Services with an EndpointSlice each are made in their own
	// namespace before the run, so that kube-proxy programs the suite's Services among
	// them.
	BackgroundServices int
	// Out is the output directory: e2e.json, e2e.md, and <mode>/ with junit_01.xml, e2e.log
	// and cluster.log.
	Out string
	// Timeout bounds the suite on each mode (ginkgo's --timeout; default 30 minutes).
	Timeout time.Duration
	// Parallel is how many e2e.test processes run the specs at once, under the ginkgo CLI
	// (default DefaultParallel; 1 runs e2e.test alone). The specs not marked [Serial] are
	// written to run in parallel: upstream's jobs run 25 processes.
	Parallel int
	// DryRun lists the specs Focus and Skip select without a cluster (ginkgo's dry run).
	DryRun bool
	// Name names the clusters (default e2e plus the process id in base 36).
	Name string
	// E2ETest is the e2e.test binary (default: upstream's, built when missing).
	E2ETest string
	// Progress receives e2e.test's output as it runs (it always goes to e2e.log too).
	Progress io.Writer
	// Logger receives the harness's own messages (default: discarded).
	Logger *slog.Logger
	// ClusterDir and LabRegistryDir are the registries' directories (default
	// kubestack's and lab's).
	ClusterDir, LabRegistryDir string
}

// Default fills unset fields.
func (o *Options) Default() {
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Focus == "" {
		o.Focus = DefaultFocus
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel
	}
	if o.Name == "" {
		o.Name = "e2e" + pidName(os.Getpid())
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// skipPattern is the --ginkgo.skip e2e.test runs with.
func (o *Options) skipPattern() string {
	if o.Skip == "" {
		return AlwaysSkip
	}
	return AlwaysSkip + "|" + o.Skip
}

// Validate checks the options (defaults applied), naming the flag at fault. It asks the
// kernel for IPVS when a mode is ipvs, and reads the files named, nothing more.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
	}
	if o.Out == "" {
		return bad("--out: required")
	}
	// e2e.test runs from the lab's client host in a working directory of its own: a
	// relative directory would put its junit beside another one's twin.
	abs, err := filepath.Abs(o.Out)
	if err != nil {
		return bad("--out %s: %v", o.Out, err)
	}
	o.Out = abs
	if st, err := os.Stat(o.Out); err == nil && !st.IsDir() {
		return bad("--out %s: not a directory", o.Out)
	}
	if _, err := regexp.Compile(o.Focus); err != nil {
		return bad("--focus %q: %v", o.Focus, err)
	}
	if _, err := regexp.Compile(o.skipPattern()); err != nil {
		return bad("--skip %q: %v", o.Skip, err)
	}
	if o.Timeout < 0 {
		return bad("--timeout %s: must be positive", o.Timeout)
	}
	if o.Parallel < 1 || o.Parallel > MaxParallel {
		return bad("--parallel %d: allowed values are 1-%d", o.Parallel, MaxParallel)
	}
	if o.BackgroundServices < 0 || o.BackgroundServices > MaxBackgroundServices {
		return bad("--background-services %d: allowed values are 0-%d", o.BackgroundServices, MaxBackgroundServices)
	}
	if o.E2ETest != "" {
		if err := executable(o.E2ETest); err != nil {
			return bad("--e2e-test %s: %v", o.E2ETest, err)
		}
	}
	if o.DryRun {
		return nil
	}
	if o.Nodes < 1 || o.Nodes > kubestack.MaxNodes {
		return bad("--nodes %d: allowed values are 1-%d", o.Nodes, kubestack.MaxNodes)
	}
	if o.KubeProxy != "" {
		if err := executable(o.KubeProxy); err != nil {
			return bad("--kube-proxy %s: %v", o.KubeProxy, err)
		}
	}
	if len(o.Modes) == 0 {
		return bad("--proxy: required (iptables, nftables or ipvs; several separated by commas)")
	}
	seen := map[kubeproxy.Mode]bool{}
	for _, m := range o.Modes {
		switch m {
		case kubeproxy.ModeIPTables, kubeproxy.ModeNFTables, kubeproxy.ModeIPVS:
		default:
			return bad("--proxy %q: allowed values are iptables, nftables, ipvs", m)
		}
		if seen[m] {
			return bad("--proxy: %s given twice", m)
		}
		seen[m] = true
		cfg := o.clusterConfig(m)
		if err := cfg.Validate(); err != nil { // what is left: the cluster's --name
			return bad("--name %s: %v", o.Name, err)
		}
		if err := kubestack.CheckProxy(m); err != nil { // "proxy ipvs: kernel has no IPVS (...)"
			return bad("--%s", strings.TrimPrefix(err.Error(), kubestack.ErrBadConfig.Error()+": "))
		}
	}
	return nil
}

// clusterConfig is the cluster of one mode's run: the nodes asked for and one client host,
// from which e2e.test runs.
func (o *Options) clusterConfig(m kubeproxy.Mode) kubestack.Config {
	cfg := kubestack.Config{
		Name: o.Name, Nodes: o.Nodes, Clients: 1, Proxy: m, KubeProxyBinary: o.KubeProxy,
		Dir: o.ClusterDir, LabRegistryDir: o.LabRegistryDir,
	}
	cfg.Default()
	return cfg
}

// executable checks that p is an executable regular file.
func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}
