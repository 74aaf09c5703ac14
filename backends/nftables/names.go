package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"kpbench.dev/kpbench/backends"
)

// Table is the nftables table the backend owns, in family ip (kube-proxy's name).
const Table = "kube-proxy"

// Base chains: connected to netfilter hooks, named "${type}-${hook}" as kube-proxy does.
const (
	filterPreroutingPreDNATChain = "filter-prerouting-pre-dnat"
	filterOutputPreDNATChain     = "filter-output-pre-dnat"
	filterInputChain             = "filter-input"
	filterForwardChain           = "filter-forward"
	filterOutputChain            = "filter-output"
	natPreroutingChain           = "nat-prerouting"
	natOutputChain               = "nat-output"
	natPostroutingChain          = "nat-postrouting"
)

// Regular chains, sets and maps of the fixed part of the ruleset.
const (
	servicesChain               = "services"
	serviceIPsMap               = "service-ips"
	serviceNodePortsMap         = "service-nodeports"
	nodePortIPsSet              = "nodeport-ips"
	clusterIPsSet               = "cluster-ips"
	serviceEndpointsCheckChain  = "service-endpoints-check"
	nodePortEndpointsCheckChain = "nodeport-endpoints-check"
	noEndpointServicesMap       = "no-endpoint-services"
	noEndpointNodePortsMap      = "no-endpoint-nodeports"
	rejectChain                 = "reject-chain"
	clusterIPsCheckChain        = "cluster-ips-check"
	firewallIPsMap              = "firewall-ips"
	firewallCheckChain          = "firewall-check"
	masqueradingChain           = "masquerading"
	hairpinSet                  = "hairpin-connections"
)

// Prefixes of the per-service objects, as kube-proxy names them.
const (
	clusterChainPrefix  = "service-"
	localChainPrefix    = "local-"
	externalChainPrefix = "external-"
	firewallChainPrefix = "firewall-"
	endpointChainPrefix = "endpoint-"
	affinitySetPrefix   = "affinity-"

	// chainNamePrefixLengthMax bounds the prefixes above (with their hyphen); the
	// hashed base of a name gets the rest of knftables.NameLengthMax.
	chainNamePrefixLengthMax = 16
	chainNameBaseLengthMax   = knftables.NameLengthMax - chainNamePrefixLengthMax
)

// hashAndTruncate prefixes name with the first 8 characters of base32(sha256(name)) and a
// hyphen, and truncates the result to chainNameBaseLengthMax (ending in "..."), like
// kube-proxy's hashAndTruncate: the hash keeps truncated names unique and makes names that
// differ in one digit easy to tell apart.
func hashAndTruncate(name string) string {
	sum := sha256.Sum256([]byte(name))
	enc := base32.StdEncoding.EncodeToString(sum[:])
	name = enc[:8] + "-" + name
	if len(name) > chainNameBaseLengthMax {
		name = name[:chainNameBaseLengthMax-3] + "..."
	}
	return name
}

// serviceNameBase returns "HASH-namespace/name/protocol/portname", the base of every
// chain name of a service port (kube-proxy's servicePortChainNameBase).
func serviceNameBase(n backends.ServicePortName) string {
	return hashAndTruncate(n.Namespace + "/" + n.Name + "/" + n.Protocol.Lower() + "/" + n.Port)
}

// endpointNameBase returns "HASH-namespace/name/protocol/portname__IP/port", the base of
// an endpoint's chain and affinity set names (kube-proxy's
// servicePortEndpointChainNameBase). Colons of IPv6 addresses become dots.
func endpointNameBase(n backends.ServicePortName, ep backends.Endpoint) string {
	ip := strings.ReplaceAll(ep.IP.String(), ":", ".")
	return hashAndTruncate(n.Namespace + "/" + n.Name + "/" + n.Protocol.Lower() + "/" + n.Port +
		"__" + ip + "/" + strconv.Itoa(int(ep.Port)))
}

// isServiceChainName reports whether chain is a per-service or per-endpoint chain: only
// those contain a slash.
func isServiceChainName(chain string) bool { return strings.Contains(chain, "/") }

// isAffinitySetName reports whether set is a per-endpoint affinity set.
func isAffinitySetName(set string) bool { return strings.HasPrefix(set, affinitySetPrefix) }

// isEndpointChain reports whether chain is a per-endpoint chain (endpoint-HASH-...).
func isEndpointChain(chain string) bool { return strings.HasPrefix(chain, endpointChainPrefix) }
