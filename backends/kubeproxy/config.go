package kubeproxy

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Mode is a kube-proxy proxy mode.
type Mode string

// The modes kpbench runs upstream kube-proxy in.
const (
	ModeIPTables Mode = "iptables"
	ModeNFTables Mode = "nftables"
	ModeIPVS     Mode = "ipvs"
)

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
// either.
func (c Config) Render() ([]byte, error) {
	switch c.Mode {
	case ModeIPTables, ModeNFTables, ModeIPVS:
	default:
		return nil, fmt.Errorf("kube-proxy config: unknown mode %q", c.Mode)
	}
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
nftables:
  masqueradeBit: %d
  masqueradeAll: %t
  minSyncPeriod: %s
  syncPeriod: %s
ipvs:
  scheduler: %s
  minSyncPeriod: %s
  syncPeriod: %s
`, bit, c.MasqueradeAll, minSync, sync, bit, c.MasqueradeAll, minSync, sync, sched, minSync, sync)
	return []byte(b.String()), nil
}
