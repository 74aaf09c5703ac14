package kubeproxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"kpbench.dev/kpbench/internal/upstream"
)

// Mode is a kube-proxy proxy mode.
type Mode string

// The modes kpbench runs upstream kube-proxy in: the values of a KubeProxyConfiguration's
// mode, which also pick the section (iptables, nftables, ipvs) that configures our own
// backends of that mode. Every other package names a mode with these.
const (
	ModeIPTables Mode = "iptables"
	ModeNFTables Mode = "nftables"
	ModeIPVS     Mode = "ipvs"
)

// Modes returns every mode, in the order users are shown them.
func Modes() []Mode { return []Mode{ModeIPTables, ModeNFTables, ModeIPVS} }

// Valid reports whether m is one of Modes.
func (m Mode) Valid() bool { return slices.Contains(Modes(), m) }

// Ports kube-proxy serves on the node's IP (its defaults).
const (
	MetricsPort = 10249
	HealthzPort = 10256
)

// Config is what a node's kube-proxy is started with. The backend fills it from the lab
// node and the scenario's proxy configuration; Render turns it into a
// KubeProxyConfiguration file.
type Config struct {
	// Mode is the proxy mode.
	Mode Mode
	// NodeName is the node's name (hostnameOverride: kube-proxy reads its Node object and
	// the EndpointSlices' nodeName with it).
	NodeName string
	// NodeIP is where the metrics (:10249) and healthz (:10256) servers listen, inside the
	// node's namespace.
	NodeIP netip.Addr
	// ClusterCIDR is the pod CIDR (detectLocalMode ClusterCIDR: traffic from outside it to a
	// ClusterIP is masqueraded).
	ClusterCIDR netip.Prefix
	// Kubeconfig is the path of the kubeconfig for the lab's API server.
	Kubeconfig string
	// MinSyncPeriod of the mode; 0 means none, as it does for the bench's own agents.
	// kube-proxy replaces a zero minSyncPeriod by its 1s default, so 0 is written as 1ns
	// (kube-proxy then syncs as soon as a change arrives, like our agents with 0).
	MinSyncPeriod time.Duration
	// SyncPeriod of the mode (0: kube-proxy's default 30s).
	SyncPeriod time.Duration
	// MasqueradeBit (0: kube-proxy's 14) and MasqueradeAll of the iptables and nftables
	// modes.
	MasqueradeBit int
	MasqueradeAll bool
	// Scheduler is the IPVS scheduler ("" = rr).
	Scheduler string
	// Version is the kube-proxy release the file is for ("": upstream.KubernetesVersion):
	// Render writes only what that release accepts (see Render).
	Version string
}

// The releases where the configuration kpbench writes changed (KEP-3866, the nftables
// mode): v1.29 added the nftables mode and its `nftables:` section, behind the
// NFTablesProxyMode feature gate; v1.31 turned the gate on by default (beta); v1.33 made
// the mode GA, and later releases drop the gate, which would then reject a file naming it.
const (
	nftablesSince        = "v1.29.0"
	nftablesDefaultSince = "v1.31.0"
)

// version is the release the file is for.
func (c Config) version() string {
	if c.Version == "" {
		return upstream.KubernetesVersion
	}
	return c.Version
}

// CheckVersion checks that c.Version is a release and has c.Mode (nftables came in v1.29).
func (c Config) CheckVersion() error {
	v := c.version()
	if !upstream.ValidVersion(v) {
		return fmt.Errorf("kube-proxy config: version %q: want vMAJOR.MINOR.PATCH", v)
	}
	if c.Mode == ModeNFTables && upstream.CompareVersions(v, nftablesSince) < 0 {
		return fmt.Errorf("kube-proxy config: kube-proxy %s has no nftables mode (it came in %s)", v, nftablesSince)
	}
	return nil
}

func durationOr(d, def time.Duration) string {
	if d <= 0 {
		d = def
	}
	return d.String()
}

// Render returns the KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) for c.
// Conntrack sizing is left alone (maxPerCore 0, min 0, timeouts 0): those sysctls are
// host-wide or would make kube-proxy fail in a namespace, and our backends do not touch them
// either. The file depends on c.Version: before v1.29 there is no nftables section (and
// no nftables mode: an error); from v1.29 to v1.30 the nftables mode needs the
// NFTablesProxyMode feature gate, which the file then turns on; from v1.31 on it is the
// same file as for upstream.KubernetesVersion.
func (c Config) Render() ([]byte, error) {
	if !c.Mode.Valid() {
		return nil, fmt.Errorf("kube-proxy config: unknown mode %q", c.Mode)
	}
	if err := c.CheckVersion(); err != nil {
		return nil, err
	}
	version := c.version()
	hasNFTables := upstream.CompareVersions(version, nftablesSince) >= 0
	if c.NodeName == "" || !c.NodeIP.IsValid() || c.Kubeconfig == "" {
		return nil, fmt.Errorf("kube-proxy config: node name, node IP and kubeconfig are required (got %q, %v, %q)", c.NodeName, c.NodeIP, c.Kubeconfig)
	}
	bit := c.MasqueradeBit
	if bit == 0 {
		bit = 14
	}
	minSync, sync := durationOr(c.MinSyncPeriod, time.Nanosecond), durationOr(c.SyncPeriod, 30*time.Second)
	sched := c.Scheduler
	if sched == "" {
		sched = "rr"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: %s
hostnameOverride: %s
metricsBindAddress: %s
healthzBindAddress: %s
clientConnection:
  kubeconfig: %q
  qps: 1000
  burst: 2000
`, c.Mode, c.NodeName, netip.AddrPortFrom(c.NodeIP, MetricsPort), netip.AddrPortFrom(c.NodeIP, HealthzPort), c.Kubeconfig)
	if c.Mode == ModeNFTables && upstream.CompareVersions(version, nftablesDefaultSince) < 0 {
		b.WriteString("featureGates:\n  NFTablesProxyMode: true\n")
	}
	if c.ClusterCIDR.IsValid() {
		fmt.Fprintf(&b, "clusterCIDR: %s\ndetectLocalMode: ClusterCIDR\n", c.ClusterCIDR)
	}
	fmt.Fprintf(&b, `conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  masqueradeBit: %d
  masqueradeAll: %t
  minSyncPeriod: %s
  syncPeriod: %s
`, bit, c.MasqueradeAll, minSync, sync)
	if hasNFTables {
		fmt.Fprintf(&b, `nftables:
  masqueradeBit: %d
  masqueradeAll: %t
  minSyncPeriod: %s
  syncPeriod: %s
`, bit, c.MasqueradeAll, minSync, sync)
	}
	fmt.Fprintf(&b, `ipvs:
  scheduler: %s
  minSyncPeriod: %s
  syncPeriod: %s
`, sched, minSync, sync)
	return []byte(b.String()), nil
}
