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

// portNameString is backends.ServicePortName.String ("ns/name:port") without fmt.
func portNameString(n backends.ServicePortName) string {
	return n.Namespace + "/" + n.Name + ":" + n.Port
}

// hashOf is kube-proxy's portProtoHash: the first 16 characters of
// base32(sha256(name + proto + extra)), name a service port's "ns/name:port", proto in lower
// case, extra an endpoint's "IP:port" for its KUBE-SEP chain.
func hashOf(name, proto, extra string) string {
	var buf [256]byte
	b := append(append(append(buf[:0], name...), proto...), extra...)
	sum := sha256.Sum256(b)
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	return string(enc[:16])
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
