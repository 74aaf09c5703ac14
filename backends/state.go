// Package backends defines what every proxy backend receives and returns: the desired state
// of one node (its service ports and their endpoints, as kube-proxy's change trackers hold
// them) and the Backend interface that programs a node's kernel to match it.
//
// The types here are plain data. Building them from Services and EndpointSlices is done by
// BuildState (view.go); turning them into kernel rules is each backend package's job.
package backends

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Protocol is a Service port's L4 protocol as Kubernetes spells it: "TCP", "UDP" or "SCTP".
type Protocol string

// The protocols a service port can have.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Lower returns the protocol in lower case, as iptables and nft write it.
func (p Protocol) Lower() string { return strings.ToLower(string(p)) }

// ServicePortName identifies one port of one Service, like kube-proxy's proxy.ServicePortName.
type ServicePortName struct {
	// Namespace and Name of the Service.
	Namespace, Name string
	// Port is the name of the port in the Service spec ("" for an unnamed single port).
	Port string
	// Protocol of the port.
	Protocol Protocol
}

// String returns "namespace/name:port", the form the kube-proxy of the iptables seed put
// in rule comments and hashes (the colon stays for an unnamed port).
func (n ServicePortName) String() string {
	return fmt.Sprintf("%s/%s:%s", n.Namespace, n.Name, n.Port)
}

// UpstreamString returns the name as kube-proxy v1.37 prints it: "namespace/name", plus
// ":port" for a named port only. The nftables mode uses it.
func (n ServicePortName) UpstreamString() string {
	if n.Port == "" {
		return n.Namespace + "/" + n.Name
	}
	return n.Namespace + "/" + n.Name + ":" + n.Port
}

// Endpoint is one backend address of a service port, with the conditions of its
// EndpointSlice entry.
type Endpoint struct {
	// IP and Port are where traffic is DNATed to.
	IP   netip.Addr
	Port int32
	// NodeName is the node hosting the endpoint ("" if unknown); Zone its topology zone.
	NodeName, Zone string
	// Ready, Serving and Terminating are the EndpointSlice conditions.
	Ready, Serving, Terminating bool
	// IsLocal is true when NodeName is the node this state is built for.
	IsLocal bool
}

// AddrPort returns "IP:port".
func (e Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.IP, uint16(e.Port)) }

// String returns "IP:port", the form kube-proxy hashes into endpoint chain names.
func (e Endpoint) String() string { return e.AddrPort().String() }

// ServicePort is one port of one Service as a node's proxy sees it: every address the
// service answers on, its policies, and all its endpoints (not yet filtered: see
// CategorizeEndpoints).
type ServicePort struct {
	// Name identifies the port.
	Name ServicePortName
	// ClusterIP is the service's virtual IP (always valid: headless and ExternalName
	// Services never reach a State).
	ClusterIP netip.Addr
	// Port is the service port on ClusterIP, externalIPs and load-balancer IPs.
	Port int32
	// NodePort is the port opened on every node address (0: none).
	NodePort int32
	// ExternalIPs are spec.externalIPs; LoadBalancerIPs are status.loadBalancer.ingress IPs.
	ExternalIPs, LoadBalancerIPs []netip.Addr
	// LoadBalancerSourceRanges restricts who may use LoadBalancerIPs (empty: everyone).
	LoadBalancerSourceRanges []netip.Prefix
	// AffinityClientIP is true for sessionAffinity: ClientIP; AffinityTimeoutSeconds is its
	// timeout (kube-proxy's default 10800).
	AffinityClientIP       bool
	AffinityTimeoutSeconds int32
	// ExternalPolicyLocal is externalTrafficPolicy: Local (only for NodePort/LoadBalancer
	// and externalIPs); InternalPolicyLocal is internalTrafficPolicy: Local.
	ExternalPolicyLocal, InternalPolicyLocal bool
	// HealthCheckNodePort answers 200/503 for ExternalPolicyLocal services (0: none).
	HealthCheckNodePort int32
	// Endpoints are all endpoints of this port, sorted by IP then port.
	Endpoints []Endpoint
}

// Protocol returns the port's protocol.
func (sp *ServicePort) Protocol() Protocol { return sp.Name.Protocol }

// ExternallyAccessible reports whether the port is reachable from outside the cluster:
// through a NodePort, an externalIP or a load-balancer IP.
func (sp *ServicePort) ExternallyAccessible() bool {
	return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

// UsesLocalExternal reports whether external traffic is restricted to local endpoints.
func (sp *ServicePort) UsesLocalExternal() bool {
	return sp.ExternalPolicyLocal && sp.ExternallyAccessible()
}

// Equal reports whether two service ports would produce the same rules.
func (sp *ServicePort) Equal(o *ServicePort) bool {
	return sp.Name == o.Name && sp.ClusterIP == o.ClusterIP && sp.Port == o.Port &&
		sp.NodePort == o.NodePort && slices.Equal(sp.ExternalIPs, o.ExternalIPs) &&
		slices.Equal(sp.LoadBalancerIPs, o.LoadBalancerIPs) &&
		slices.Equal(sp.LoadBalancerSourceRanges, o.LoadBalancerSourceRanges) &&
		sp.AffinityClientIP == o.AffinityClientIP && sp.AffinityTimeoutSeconds == o.AffinityTimeoutSeconds &&
		sp.ExternalPolicyLocal == o.ExternalPolicyLocal && sp.InternalPolicyLocal == o.InternalPolicyLocal &&
		sp.HealthCheckNodePort == o.HealthCheckNodePort && slices.Equal(sp.Endpoints, o.Endpoints)
}

// State is the whole desired state of one node, handed to Backend.Sync at every sync.
type State struct {
	// NodeName is the node this state is for.
	NodeName string
	// NodeIPs are the node's own addresses (NodePorts are served on them).
	NodeIPs []netip.Addr
	// ClusterCIDR is the pod network; traffic to a ClusterIP from outside it is masqueraded.
	// Invalid (zero) when not configured, in which case only masqueradeAll applies.
	ClusterCIDR netip.Prefix
	// MasqueradeAll masquerades all traffic to service IPs (kube-proxy's masqueradeAll).
	MasqueradeAll bool
	// ServiceCIDRs are the ranges ClusterIPs are allocated from; kube-proxy's nftables
	// mode drops traffic to the addresses in them that no Service has. Empty: unknown.
	ServiceCIDRs []netip.Prefix
	// Services are all service ports, sorted by Name (namespace, name, port, protocol).
	Services []*ServicePort
}

// SortServices sorts s.Services by name, the order every backend relies on.
func (s *State) SortServices() {
	slices.SortFunc(s.Services, func(a, b *ServicePort) int { return CompareNames(a.Name, b.Name) })
}

// CompareNames orders service port names by namespace, name, port name and protocol.
func CompareNames(a, b ServicePortName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	return strings.Compare(string(a.Protocol), string(b.Protocol))
}

// Find returns the service port with the given name, or nil.
func (s *State) Find(name ServicePortName) *ServicePort {
	for _, sp := range s.Services {
		if sp.Name == name {
			return sp
		}
	}
	return nil
}

// Snapshot copies the state's service ports into a map keyed by name, deep enough that
// later changes to st do not show through: what a backend keeps of the last state it
// programmed, to compare the next one with.
func Snapshot(st *State) map[ServicePortName]*ServicePort {
	m := make(map[ServicePortName]*ServicePort, len(st.Services))
	for _, sp := range st.Services {
		cp := *sp
		cp.ExternalIPs = slices.Clone(sp.ExternalIPs)
		cp.LoadBalancerIPs = slices.Clone(sp.LoadBalancerIPs)
		cp.LoadBalancerSourceRanges = slices.Clone(sp.LoadBalancerSourceRanges)
		cp.Endpoints = slices.Clone(sp.Endpoints)
		m[sp.Name] = &cp
	}
	return m
}
