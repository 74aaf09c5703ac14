package backendstest

import (
	"fmt"
	"net/netip"
	"strings"

	"kpbench.dev/kpbench/backends"
)

// The node the states of this package are built for, and the node of other endpoints.
const (
	Node      = "node-1"
	OtherNode = "node-2"
)

// EndpointOption changes an endpoint built by EP.
type EndpointOption func(*backends.Endpoint)

// Local puts the endpoint on Node.
func Local(e *backends.Endpoint) { e.IsLocal, e.NodeName = true, Node }

// LocalIf puts the endpoint on Node when local is true.
func LocalIf(local bool) EndpointOption {
	return func(e *backends.Endpoint) {
		if local {
			Local(e)
		}
	}
}

// Terminating makes the endpoint terminating and still serving (not ready).
func Terminating(e *backends.Endpoint) { e.Ready, e.Serving, e.Terminating = false, true, true }

// NotReady makes the endpoint neither ready nor serving.
func NotReady(e *backends.Endpoint) { e.Ready, e.Serving = false, false }

// EP returns a ready, serving endpoint at addrPort ("10.1.0.2:8080") on OtherNode.
func EP(addrPort string, opts ...EndpointOption) backends.Endpoint {
	a := netip.MustParseAddrPort(addrPort)
	e := backends.Endpoint{IP: a.Addr(), Port: int32(a.Port()), NodeName: OtherNode, Ready: true, Serving: true}
	for _, o := range opts {
		o(&e)
	}
	return e
}

// EPs returns n ready endpoints on port, numbered from first: endpoint k is
// 10.1.(k/250).(k%250+1). The first `local` of them are on Node. Sorted.
func EPs(first, n int, port int32, local int) []backends.Endpoint {
	out := make([]backends.Endpoint, n)
	for i := range n {
		k := first + i
		out[i] = EP(fmt.Sprintf("10.1.%d.%d:%d", k/250, k%250+1, port), LocalIf(i < local))
	}
	backends.SortEndpoints(out)
	return out
}

// Service returns a service port named by ref, "namespace/name[:port][/udp|/sctp]" (TCP
// unless the protocol is given; no :port for an unnamed port), at vipPort
// ("172.30.0.41:80"), with eps (sorted).
func Service(ref, vipPort string, eps ...backends.Endpoint) *backends.ServicePort {
	parts := strings.Split(ref, "/")
	if len(parts) < 2 || len(parts) > 3 {
		panic(fmt.Sprintf("backendstest.Service: %q is not namespace/name[:port][/protocol]", ref))
	}
	ns := parts[0]
	name, port, _ := strings.Cut(parts[1], ":")
	protoName := ""
	if len(parts) == 3 {
		protoName = parts[2]
	}
	p := backends.TCP
	switch strings.ToLower(protoName) {
	case "", "tcp":
	case "udp":
		p = backends.UDP
	case "sctp":
		p = backends.SCTP
	default:
		panic(fmt.Sprintf("backendstest.Service: protocol %q", protoName))
	}
	vip := netip.MustParseAddrPort(vipPort)
	eps = append([]backends.Endpoint(nil), eps...)
	backends.SortEndpoints(eps)
	return &backends.ServicePort{
		Name:      backends.ServicePortName{Namespace: ns, Name: name, Port: port, Protocol: p},
		ClusterIP: vip.Addr(), Port: int32(vip.Port()), Endpoints: eps,
	}
}

// With applies fns to sp and returns it.
func With(sp *backends.ServicePort, fns ...func(*backends.ServicePort)) *backends.ServicePort {
	for _, f := range fns {
		f(sp)
	}
	return sp
}

// State returns Node's desired state holding sps, sorted, with the node address
// 192.168.0.1 and the cluster CIDR 10.0.0.0/8. States are plain data: set other fields on
// the result.
func State(sps ...*backends.ServicePort) *backends.State {
	st := &backends.State{
		NodeName:    Node,
		NodeIPs:     []netip.Addr{netip.MustParseAddr("192.168.0.1")},
		ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8"),
		Services:    sps,
	}
	st.SortServices()
	return st
}
