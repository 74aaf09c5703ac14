package scenarios

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/yamlpos"
)

// KubeProxyConfiguration's apiVersion and kind.
const (
	ProxyConfigAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	ProxyConfigKind       = "KubeProxyConfiguration"
)

// Defaults of kube-proxy's sync loop.
const (
	DefaultMinSyncPeriod = time.Second
	DefaultSyncPeriod    = 30 * time.Second
	// DefaultMasqueradeBit is the fwmark bit of KUBE-MARK-MASQ (0x4000).
	DefaultMasqueradeBit int32 = 14
	// DefaultIPVSScheduler is IPVS's round robin.
	DefaultIPVSScheduler = "rr"
)

// ProxyConfig is the subset of kube-proxy's KubeProxyConfiguration
// (kubeproxy.config.k8s.io/v1alpha1) that kpbench uses, with the same field names.
type ProxyConfig struct {
	// APIVersion and Kind are "kubeproxy.config.k8s.io/v1alpha1" and
	// "KubeProxyConfiguration": required in a file, optional inline.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Mode is iptables, ipvs, nftables, or "" (not fixed by the scenario: the backends
	// chosen on the command line run it).
	Mode string `json:"mode,omitempty"`
	// ClusterCIDR is the pod network (comma-separated CIDRs); traffic to a ClusterIP from
	// outside it is masqueraded. Default: the topology's podCIDR.
	ClusterCIDR string `json:"clusterCIDR,omitempty"`
	// IPTables configures iptables mode.
	IPTables IPTablesConfig `json:"iptables,omitempty"`
	// IPVS configures ipvs mode.
	IPVS IPVSConfig `json:"ipvs,omitempty"`
	// NFTables configures nftables mode.
	NFTables NFTablesConfig `json:"nftables,omitempty"`
}

// IPTablesConfig is KubeProxyIPTablesConfiguration's subset.
type IPTablesConfig struct {
	// MasqueradeAll masquerades all traffic to service IPs.
	MasqueradeAll bool `json:"masqueradeAll,omitempty"`
	// MasqueradeBit is the fwmark bit marking packets for SNAT, 0-31 (default 14).
	MasqueradeBit *int32 `json:"masqueradeBit,omitempty"`
	// SyncPeriod is the period of full resyncs (default 30s).
	SyncPeriod *Duration `json:"syncPeriod,omitempty"`
	// MinSyncPeriod is the minimum time between syncs (default 1s).
	MinSyncPeriod *Duration `json:"minSyncPeriod,omitempty"`
}

// IPVSConfig is KubeProxyIPVSConfiguration's subset.
type IPVSConfig struct {
	// Scheduler is the IPVS scheduler (default rr).
	Scheduler string `json:"scheduler,omitempty"`
	// StrictARP sets arp_ignore=1 and arp_announce=2.
	StrictARP bool `json:"strictARP,omitempty"`
	// SyncPeriod and MinSyncPeriod as for iptables.
	SyncPeriod    *Duration `json:"syncPeriod,omitempty"`
	MinSyncPeriod *Duration `json:"minSyncPeriod,omitempty"`
}

// NFTablesConfig is KubeProxyNFTablesConfiguration's subset.
type NFTablesConfig struct {
	// SyncPeriod and MinSyncPeriod as for iptables.
	SyncPeriod    *Duration `json:"syncPeriod,omitempty"`
	MinSyncPeriod *Duration `json:"minSyncPeriod,omitempty"`
}

// Default fills unset fields with kube-proxy's defaults: sync periods 30s / 1s for every
// mode, masqueradeBit 14, IPVS scheduler rr. ClusterCIDR is left alone (the scenario
// defaults it to the topology's podCIDR).
func (c *ProxyConfig) Default() {
	defaultPeriods := func(sync, minSync **Duration) {
		if *sync == nil {
			*sync = NewDuration(DefaultSyncPeriod)
		}
		if *minSync == nil {
			*minSync = NewDuration(DefaultMinSyncPeriod)
		}
	}
	defaultPeriods(&c.IPTables.SyncPeriod, &c.IPTables.MinSyncPeriod)
	defaultPeriods(&c.IPVS.SyncPeriod, &c.IPVS.MinSyncPeriod)
	defaultPeriods(&c.NFTables.SyncPeriod, &c.NFTables.MinSyncPeriod)
	if c.IPTables.MasqueradeBit == nil {
		b := DefaultMasqueradeBit
		c.IPTables.MasqueradeBit = &b
	}
	setDefault(&c.IPVS.Scheduler, DefaultIPVSScheduler)
}

// ipvsSchedulers lists the schedulers kube-proxy accepts.
func ipvsSchedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq", "mh"}
}

// Validate checks a defaulted configuration; p is its path ("" for a file's root,
// "proxy" inline).
func (c *ProxyConfig) Validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Mode != "" && !kubeproxy.Mode(c.Mode).Valid() {
		var allowed []string
		for _, m := range kubeproxy.Modes() {
			allowed = append(allowed, string(m))
		}
		allowed = append(allowed, `"" (chosen on the command line)`)
		errs = append(errs, field.NotSupported(p.Child("mode"), c.Mode, allowed))
	}
	if c.ClusterCIDR != "" {
		for i, cidr := range strings.Split(c.ClusterCIDR, ",") {
			pfx, err := netip.ParsePrefix(strings.TrimSpace(cidr))
			if err != nil || !pfx.Addr().Is4() {
				errs = append(errs, field.Invalid(p.Child("clusterCIDR"), c.ClusterCIDR, fmt.Sprintf("entry %d must be an IPv4 CIDR such as 10.244.0.0/16", i)))
			}
		}
	}
	periods := func(pp *field.Path, sync, minSync *Duration) {
		if sync != nil && sync.Duration <= 0 {
			errs = append(errs, field.Invalid(pp.Child("syncPeriod"), sync.String(), "must be greater than 0"))
		}
		if minSync != nil && minSync.Duration < 0 {
			errs = append(errs, field.Invalid(pp.Child("minSyncPeriod"), minSync.String(), "must be greater than or equal to 0"))
		}
		if sync != nil && minSync != nil && sync.Duration > 0 && minSync.Duration > sync.Duration {
			errs = append(errs, field.Invalid(pp.Child("minSyncPeriod"), minSync.String(), fmt.Sprintf("must be less than or equal to syncPeriod (%s)", sync.Duration)))
		}
	}
	periods(p.Child("iptables"), c.IPTables.SyncPeriod, c.IPTables.MinSyncPeriod)
	periods(p.Child("ipvs"), c.IPVS.SyncPeriod, c.IPVS.MinSyncPeriod)
	periods(p.Child("nftables"), c.NFTables.SyncPeriod, c.NFTables.MinSyncPeriod)
	if b := c.IPTables.MasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		errs = append(errs, field.Invalid(p.Child("iptables", "masqueradeBit"), *b, "must be in range 0-31"))
	}
	if s := c.IPVS.Scheduler; s != "" && !contains(ipvsSchedulers(), s) {
		errs = append(errs, field.NotSupported(p.Child("ipvs", "scheduler"), s, ipvsSchedulers()))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// LoadProxyConfig reads a KubeProxyConfiguration file; see ParseProxyConfig.
func LoadProxyConfig(path string) (ProxyConfig, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ProxyConfig{}, nil, fmt.Errorf("read proxy config: %w", err)
	}
	return ParseProxyConfig(path, data)
}

// ParseProxyConfig decodes a KubeProxyConfiguration (one document, apiVersion
// kubeproxy.config.k8s.io/v1alpha1) leniently, as kube-proxy does: a field kpbench does
// not know is ignored with a warning naming it (and, for the misspellings people write,
// the field meant), and the real KubeProxyConfiguration fields kpbench has no use for
// (clientConnection, bindAddress, metrics, healthz, profiling, hostnameOverride, ...) are
// accepted with a note that they are unused. Wrong types and bad values are errors with
// file:line:field. The result is defaulted (see ProxyConfig.Default).
func ParseProxyConfig(file string, data []byte) (ProxyConfig, []string, error) {
	docs, err := yamlpos.Split(file, data)
	if err != nil {
		return ProxyConfig{}, nil, err
	}
	switch {
	case len(docs) == 0:
		return ProxyConfig{}, nil, &yamlpos.Error{File: file, Line: 1, Msg: "empty file (no YAML document, or only comments): expected a KubeProxyConfiguration"}
	case len(docs) > 1:
		return ProxyConfig{}, nil, &yamlpos.Error{File: file, Line: docs[1].Line(), Msg: "expected one KubeProxyConfiguration document, found more"}
	}
	return parseProxyDoc(docs[0], true)
}

// parseProxyDoc decodes a KubeProxyConfiguration document leniently. requireType demands
// apiVersion and kind.
func parseProxyDoc(doc *yamlpos.Doc, requireType bool) (ProxyConfig, []string, error) {
	var warnings []string
	dec := yamlpos.Decoder{OnUnknownField: func(p *field.Path, k, v *yaml.Node) {
		warnings = append(warnings, unknownProxyField(doc, p, k, v)...)
	}}
	var c ProxyConfig
	errs := yamlpos.AsErrors(dec.Decode(doc, &c))
	if len(errs) == 0 {
		if requireType || c.APIVersion != "" || c.Kind != "" {
			if c.APIVersion != ProxyConfigAPIVersion {
				errs = append(errs, doc.Errorf("apiVersion", "Unsupported value: %q: must be %q", c.APIVersion, ProxyConfigAPIVersion))
			}
			if c.Kind != ProxyConfigKind {
				errs = append(errs, doc.Errorf("kind", "Unsupported value: %q: must be %q", c.Kind, ProxyConfigKind))
			}
		}
		c.Default()
		errs = append(errs, doc.FromFieldList(c.Validate(nil))...)
	}
	if len(errs) > 0 {
		return ProxyConfig{}, warnings, errs
	}
	return c, warnings, nil
}

// misnamedSections maps section names people write (from kube-proxy's Go type names) to
// the real field names.
func misnamedSections() map[string]string {
	return map[string]string{
		"kubeProxyIPTablesConfiguration":  "iptables",
		"kubeProxyIPVSConfiguration":      "ipvs",
		"kubeProxyNFTablesConfiguration":  "nftables",
		"kubeProxyConntrackConfiguration": "conntrack",
		"kubeProxyWinkernelConfiguration": "winkernel",
	}
}

// unusedFields lists real KubeProxyConfiguration fields kpbench accepts and ignores (the
// lab has no API server, metrics or health endpoints of kube-proxy's own).
func unusedFields() []string {
	return []string{
		"clientConnection", "bindAddress", "healthzBindAddress", "metricsBindAddress",
		"bindAddressHardFail", "enableProfiling", "hostnameOverride", "featureGates",
		"portRange", "oomScoreAdj", "conntrack", "configSyncPeriod", "nodePortAddresses",
		"udpIdleTimeout", "detectLocalMode", "detectLocal", "showHiddenMetricsForVersion",
		"logging", "winkernel", "ipvs.excludeCIDRs", "ipvs.tcpTimeout", "ipvs.tcpFinTimeout",
		"ipvs.udpTimeout", "iptables.localhostNodePorts", "nftables.masqueradeAll",
		"nftables.masqueradeBit", "ipvs.masqueradeAll",
	}
}

// unknownProxyField explains one field the decoder did not know.
func unknownProxyField(doc *yamlpos.Doc, p *field.Path, k, v *yaml.Node) []string {
	name := p.String()
	if contains(unusedFields(), name) {
		return []string{fmt.Sprintf("%s:%d: %s: accepted but not used by kpbench", doc.File, k.Line, name)}
	}
	root, rest, _ := strings.Cut(name, ".")
	if real, ok := misnamedSections()[root]; ok {
		real = strings.TrimSuffix(real+"."+rest, ".")
		if v.Kind == yaml.MappingNode && rest == "" {
			// Name each ignored field of the section, with the field meant.
			var out []string
			for i := 0; i+1 < len(v.Content); i += 2 {
				ck := v.Content[i]
				out = append(out, fmt.Sprintf("%s:%d: %s.%s: unknown field, ignored (did you mean %s.%s?)", doc.File, ck.Line, name, ck.Value, real, ck.Value))
			}
			if len(out) > 0 {
				return out
			}
		}
		return []string{fmt.Sprintf("%s:%d: %s: unknown field, ignored (did you mean %s?)", doc.File, k.Line, name, real)}
	}
	return []string{fmt.Sprintf("%s:%d: %s: unknown field, ignored", doc.File, k.Line, name)}
}
