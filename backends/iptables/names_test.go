package iptables

import "kpbench.dev/kpbench/backends"

// kube-proxy's chain names computed the plain way, one hash per call, for the tests to
// check the generator's (which hashes each service port once) against.

// portProtoHash is kube-proxy's portProtoHash: the first 16 characters of
// base32(sha256(servicePortName + protocol)), protocol in lower case.
func portProtoHash(name backends.ServicePortName, extra string) string {
	return hashOf(portNameString(name), protoLower(name.Protocol), extra)
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

// EndpointChain returns the KUBE-SEP-* chain of one endpoint of a service port
// (servicePortEndpointChainName: the hash covers name, protocol and "IP:port").
func EndpointChain(name backends.ServicePortName, ep backends.Endpoint) string {
	return EndpointChainPrefix + portProtoHash(name, ep.String())
}
