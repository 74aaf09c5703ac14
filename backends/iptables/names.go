package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"kpbench.dev/kpbench/backends"
)

// Chain-name prefixes of per-service chains in the nat table, as kube-proxy names them.
const (
	// ServiceChainPrefix starts the cluster-policy chain of a service port (KUBE-SVC-*).
	ServiceChainPrefix = "KUBE-SVC-"
	// LocalChainPrefix starts the local-policy chain of a service port (KUBE-SVL-*).
	LocalChainPrefix = "KUBE-SVL-"
	// ExternalChainPrefix starts the external-traffic entry chain (KUBE-EXT-*).
	ExternalChainPrefix = "KUBE-EXT-"
	// FirewallChainPrefix starts the loadBalancerSourceRanges chain (KUBE-FW-*).
	FirewallChainPrefix = "KUBE-FW-"
	// EndpointChainPrefix starts the per-endpoint DNAT chain (KUBE-SEP-*).
	EndpointChainPrefix = "KUBE-SEP-"
)

// Top-level chains kube-proxy owns.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainForward          = "KUBE-FORWARD"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
	ChainMarkDrop         = "KUBE-MARK-DROP"
	ChainCanary           = "KUBE-PROXY-CANARY"
)

// portProtoHash is kube-proxy's portProtoHash: the first 16 characters of
// base32(sha256(servicePortName + protocol)), protocol in lower case.
func portProtoHash(name backends.ServicePortName, extra string) string {
	return hashOf(portNameString(name), protoLower(name.Protocol), extra)
}

// portNameString is backends.ServicePortName.String ("ns/name:port") without fmt.
func portNameString(n backends.ServicePortName) string {
	return n.Namespace + "/" + n.Name + ":" + n.Port
}

// hashOf hashes name + proto + extra as portProtoHash does.
func hashOf(name, proto, extra string) string {
	var buf [256]byte
	b := append(append(append(buf[:0], name...), proto...), extra...)
	sum := sha256.Sum256(b)
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	return string(enc[:16])
}

// ServiceChain returns the KUBE-SVC-* chain of a service port (kube-proxy's
// servicePortPolicyClusterChain).
func ServiceChain(name backends.ServicePortName) string {
	return ServiceChainPrefix + portProtoHash(name, "")
}

// LocalChain returns the KUBE-SVL-* chain of a service port (servicePortPolicyLocalChainName).
func LocalChain(name backends.ServicePortName) string {
	return LocalChainPrefix + portProtoHash(name, "")
}

// ExternalChain returns the KUBE-EXT-* chain of a service port (serviceExternalChainName).
func ExternalChain(name backends.ServicePortName) string {
	return ExternalChainPrefix + portProtoHash(name, "")
}

// FirewallChain returns the KUBE-FW-* chain of a service port (serviceFirewallChainName).
func FirewallChain(name backends.ServicePortName) string {
	return FirewallChainPrefix + portProtoHash(name, "")
}

// EndpointChain returns the KUBE-SEP-* chain of one endpoint of a service port
// (servicePortEndpointChainName: the hash covers name, protocol and "IP:port").
func EndpointChain(name backends.ServicePortName, ep backends.Endpoint) string {
	return EndpointChainPrefix + portProtoHash(name, ep.String())
}

// IsServiceChain reports whether chain is one of the per-service chains this package
// creates and deletes (KUBE-SVC/SVL/EXT/FW/SEP-*).
func IsServiceChain(chain string) bool {
	for _, p := range [...]string{ServiceChainPrefix, LocalChainPrefix, ExternalChainPrefix, FirewallChainPrefix, EndpointChainPrefix} {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}
