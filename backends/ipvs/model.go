// Package ipvs is the "ipvs" proxy mode: every service address and port is an IPVS virtual
// server (moby/ipvs over generic netlink), each endpoint a real server in masquerade (NAT)
// mode; ClusterIPs, externalIPs and load-balancer IPs are bound to the dummy interface
// kube-ipvs0 so the node accepts them as local; a handful of ipsets and a constant iptables
// ruleset add masquerading, node ports and load-balancer source ranges, as kube-proxy's
// IPVS mode does (pkg/proxy/ipvs).
//
// The package is split like the other backends: the desired IPVS model, the diff against
// the kernel's model, the ipset restore input and the iptables input are pure code
// (model.go, diff.go, ipset.go, rules.go), tested without root against golden files; the
// Backend (backend_linux.go) applies them inside a node's network namespace.
//
// IPVS needs a kernel built with CONFIG_IP_VS. New refuses with ErrNoIPVS when the node's
// kernel has no IPVS generic-netlink family (moby/ipvs would otherwise silently do nothing).
// Privileged tests skip on such a kernel, or fail when KPBENCH_REQUIRE_IPVS=1; run them in
// the microVM (`kpbench vm run`, make test-vm).
package ipvs

import (
	"fmt"
	"net/netip"
	"slices"

	"kpbench.dev/kpbench/backends"
)

// DummyDevice is the dummy interface that holds every service address as a /32, so the
// node's stack accepts packets to them and IPVS (on LOCAL_IN) sees them.
const DummyDevice = "kube-ipvs0"

// DefaultScheduler is kube-proxy's default IPVS scheduler (round robin).
const DefaultScheduler = "rr"

// Schedulers returns the IPVS scheduler names New accepts: those kube-proxy documents,
// plus mh, the Maglev hash scheduler of kernel 4.18+.
func Schedulers() []string {
	return []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq", "mh"}
}

// ValidScheduler reports whether name is an accepted IPVS scheduler.
func ValidScheduler(name string) bool { return slices.Contains(Schedulers(), name) }

// Virtual-server flags, as the kernel's IP_VS_SVC_F_* (include/uapi/linux/ip_vs.h).
const (
	// FlagPersistent makes a virtual server persistent: a client (source IP) keeps its real
	// server until Timeout seconds pass without a connection. kube-proxy's ClientIP affinity.
	FlagPersistent uint32 = 0x1
	// FlagHashed is set by the kernel on every virtual server in its table; it is ignored
	// when comparing.
	FlagHashed uint32 = 0x2
)

// ServiceKey identifies an IPVS virtual server: address, protocol and port.
type ServiceKey struct {
	// Addr is the virtual address (ClusterIP, externalIP, load-balancer IP or node IP).
	Addr netip.Addr
	// Protocol is the L4 protocol ("TCP", "UDP", "SCTP").
	Protocol backends.Protocol
	// Port is the virtual port (the service port, or the node port on node IPs).
	Port uint16
}

// String returns "TCP/10.0.0.1:80", the way ipvsadm -Ln names a virtual server.
func (k ServiceKey) String() string {
	return fmt.Sprintf("%s/%s", k.Protocol, netip.AddrPortFrom(k.Addr, k.Port))
}

// Compare orders keys by address, protocol, then port.
func (k ServiceKey) Compare(o ServiceKey) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if k.Protocol != o.Protocol {
		if k.Protocol < o.Protocol {
			return -1
		}
		return 1
	}
	return int(k.Port) - int(o.Port)
}

// VirtualServer is one IPVS virtual server with its real servers.
//
// Equivalent to: `ipvsadm -A -t $addr:$port -s $scheduler [-p $timeout]` and, per real
// server, `ipvsadm -a -t $addr:$port -r $ip:$port -m -w $weight`.
type VirtualServer struct {
	// Key is the address, protocol and port.
	Key ServiceKey
	// Scheduler is the IPVS scheduler name.
	Scheduler string
	// Flags are IP_VS_SVC_F_* flags without FlagHashed (FlagPersistent for ClientIP affinity).
	Flags uint32
	// Timeout is the persistence timeout in seconds (0 unless FlagPersistent).
	Timeout uint32
	// Dests maps each real server to its weight: 1 for endpoints taking new connections,
	// 0 for terminating ones that only keep their established connections.
	Dests map[netip.AddrPort]int
	// Owner is the service port this virtual server belongs to (zero in a model read back
	// from the kernel).
	Owner backends.ServicePortName
}

// sameConfig reports whether the virtual-server settings (not the real servers) match.
func (v *VirtualServer) sameConfig(o *VirtualServer) bool {
	return v.Scheduler == o.Scheduler && v.Flags == o.Flags && v.Timeout == o.Timeout
}

// Model is a node's IPVS configuration: virtual servers and the addresses on kube-ipvs0.
type Model struct {
	// Services are the virtual servers by key.
	Services map[ServiceKey]*VirtualServer
	// Addrs are the addresses bound to kube-ipvs0 (as /32).
	Addrs map[netip.Addr]bool
}

// NewModel returns an empty model.
func NewModel() *Model {
	return &Model{Services: map[ServiceKey]*VirtualServer{}, Addrs: map[netip.Addr]bool{}}
}

// Counts returns the number of virtual servers and of real servers.
func (m *Model) Counts() (services, dests int) {
	for _, vs := range m.Services {
		services++
		dests += len(vs.Dests)
	}
	return services, dests
}

// SortedKeys returns the virtual-server keys in order.
func (m *Model) SortedKeys() []ServiceKey {
	keys := make([]ServiceKey, 0, len(m.Services))
	for k := range m.Services {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, ServiceKey.Compare)
	return keys
}

// add inserts a virtual server, merging with one already there (two service ports may share
// an address and port only when the cluster is misconfigured; the first one wins).
func (m *Model) add(vs *VirtualServer) {
	if _, ok := m.Services[vs.Key]; !ok {
		m.Services[vs.Key] = vs
	}
}

// Build computes the desired IPVS model of a node from its state, as kube-proxy's IPVS
// proxier does on every sync (IPv4 only: IPv6 addresses are left out):
//
//   - ClusterIP:port, each externalIP:port and each load-balancer IP:port is a virtual
//     server, and the address is bound to kube-ipvs0;
//   - a NodePort is a virtual server on every node IP (not bound: node IPs are already local);
//   - real servers are the endpoints CategorizeEndpoints selects for the path: the cluster
//     set for ClusterIP (the local set with internalTrafficPolicy Local), the local set for
//     external addresses and node ports with externalTrafficPolicy Local; a Local path on
//     a node without local endpoints falls back to the cluster set, which is empty unless
//     the port needs it for another path (kube-proxy v1.37's syncEndpoint); weight 1;
//   - terminating endpoints of that path that are not used get weight 0 and stay until they
//     leave the state, so their established connections drain;
//   - ClientIP affinity is persistence: FlagPersistent with Timeout = AffinityTimeoutSeconds;
//   - a service port without endpoints keeps its virtual server with no real servers: IPVS
//     then answers a new connection with ICMP port unreachable, so the client gets
//     "connection refused" at once (checked on a Debian 6.1 kernel: IcmpOutDestUnreachs
//     grows; TestKernelTraffic asserts ECONNREFUSED).
func Build(st *backends.State, scheduler string) *Model {
	m := NewModel()
	for _, sp := range st.Services {
		if !sp.ClusterIP.Is4() {
			continue // IPv4 only
		}
		c := backends.CategorizeEndpoints(sp)
		// A path with a Local policy uses the local endpoints, or, when the node has none,
		// the cluster endpoints (none unless the port needs them anyway), as kube-proxy's
		// syncEndpoint does since kubernetes#97081 so that pods on the node still reach the
		// service. External traffic is then forwarded without SNAT, and the client drops
		// the reply, which comes from the pod's address.
		pick := func(localPolicy bool) ([]backends.Endpoint, bool) {
			if localPolicy && len(c.Local) > 0 {
				return c.Local, true
			}
			return c.Cluster, false
		}
		internal, internalLocal := pick(sp.InternalPolicyLocal)
		external, externalLocal := pick(sp.UsesLocalExternal())
		var flags, timeout uint32
		if sp.AffinityClientIP {
			flags, timeout = FlagPersistent, uint32(sp.AffinityTimeoutSeconds)
		}
		mk := func(addr netip.Addr, port int32, eps []backends.Endpoint, localOnly bool) *VirtualServer {
			return &VirtualServer{
				Key:       ServiceKey{Addr: addr, Protocol: sp.Protocol(), Port: uint16(port)},
				Scheduler: scheduler, Flags: flags, Timeout: timeout,
				Dests: dests(sp, eps, localOnly), Owner: sp.Name,
			}
		}
		m.add(mk(sp.ClusterIP, sp.Port, internal, internalLocal))
		m.Addrs[sp.ClusterIP] = true
		for _, ip := range append(slices.Clone(sp.ExternalIPs), sp.LoadBalancerIPs...) {
			if !ip.Is4() {
				continue
			}
			m.add(mk(ip, sp.Port, external, externalLocal))
			m.Addrs[ip] = true
		}
		if sp.NodePort != 0 {
			for _, ip := range st.NodeIPs {
				if !ip.Is4() {
					continue
				}
				m.add(mk(ip, sp.NodePort, external, externalLocal))
			}
		}
	}
	return m
}

// dests returns the real servers of one path: used endpoints with weight 1, then the
// remaining terminating endpoints of the path (local ones only when localOnly) with weight 0.
func dests(sp *backends.ServicePort, used []backends.Endpoint, localOnly bool) map[netip.AddrPort]int {
	d := make(map[netip.AddrPort]int, len(used))
	for _, ep := range used {
		if ep.IP.Is4() {
			d[ep.AddrPort()] = 1
		}
	}
	for _, ep := range sp.Endpoints {
		if !ep.IP.Is4() || !ep.Terminating || (localOnly && !ep.IsLocal) {
			continue
		}
		if _, ok := d[ep.AddrPort()]; !ok {
			d[ep.AddrPort()] = 0
		}
	}
	return d
}
