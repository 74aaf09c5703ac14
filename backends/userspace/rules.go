package userspace

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"

	"kpbench.dev/kpbench/backends"
)

// The chains this backend owns, named as kube-proxy's userspace mode named them (plus one
// filter chain for the services it refuses).
const (
	// ChainPortalsContainer (nat, from PREROUTING) redirects traffic that arrives from pods
	// and other hosts for ClusterIPs, externalIPs and load-balancer IPs to the proxy.
	ChainPortalsContainer = "KUBE-PORTALS-CONTAINER"
	// ChainPortalsHost (nat, from OUTPUT) does the same for traffic of the node itself.
	ChainPortalsHost = "KUBE-PORTALS-HOST"
	// ChainNodePortContainer (nat, from PREROUTING) redirects node ports on local addresses.
	ChainNodePortContainer = "KUBE-NODEPORT-CONTAINER"
	// ChainNodePortHost (nat, from OUTPUT) redirects node ports the node connects to itself.
	ChainNodePortHost = "KUBE-NODEPORT-HOST"
	// ChainReject (filter, from INPUT, FORWARD and OUTPUT) rejects service ports without
	// endpoints and drops those whose Local policy leaves none.
	ChainReject = "KUBE-PORTALS-REJECT"
)

// Jump is one rule of a built-in chain that enters a chain of this backend.
type Jump struct {
	// Table is "nat" or "filter"; From the built-in chain; To the backend's chain.
	Table, From, To string
}

// Jumps returns the jumps into this backend's chains, in the order they are appended.
func Jumps() []Jump {
	return []Jump{
		{"nat", "PREROUTING", ChainPortalsContainer},
		{"nat", "PREROUTING", ChainNodePortContainer},
		{"nat", "OUTPUT", ChainPortalsHost},
		{"nat", "OUTPUT", ChainNodePortHost},
		{"filter", "INPUT", ChainReject},
		{"filter", "FORWARD", ChainReject},
		{"filter", "OUTPUT", ChainReject},
	}
}

// Action is what the rules do with traffic for one service port.
type Action int

// The actions of a portal.
const (
	// Redirect sends the traffic to the proxy's listener (the port has endpoints).
	Redirect Action = iota
	// Reject refuses it (no endpoints at all: TCP clients see "connection refused", UDP
	// clients an ICMP port unreachable).
	Reject
	// Drop drops it (endpoints exist, but a Local traffic policy leaves none for this node).
	Drop
)

// Portal is one service port as the rules see it: its addresses, the local port its proxy
// listens on, and what to do with its traffic.
type Portal struct {
	// Service is the service port (its ClusterIP, Port, NodePort, ExternalIPs and
	// LoadBalancerIPs are used).
	Service *backends.ServicePort
	// ProxyPort is the port of the proxy's listener in the node namespace (0.0.0.0:ProxyPort).
	ProxyPort uint16
	// Action is what happens to the traffic.
	Action Action
}

// Generated describes one generated input.
type Generated struct {
	// Rules is the number of -A lines; Bytes the size of the input.
	Rules, Bytes int
}

// Generate writes the iptables-restore input (for `iptables-restore --noflush`) that makes
// this backend's chains hold exactly the rules for portals. Every chain is declared, which
// flushes it, and rewritten whole: the rules are few (a handful per service port) and only
// change when a service's addresses, its proxy port or its endpoint emptiness change.
//
// hostIP is where traffic of the node itself is DNATed to (KUBE-PORTALS-HOST,
// KUBE-NODEPORT-HOST), as kube-proxy's userspace mode did: REDIRECT in OUTPUT would send it
// to 127.0.0.1, and UDP replies of the proxy (sent from the node's address) would then not
// match the connection's reply tuple. When hostIP is invalid, REDIRECT is used.
func Generate(w *bytes.Buffer, portals []Portal, hostIP netip.Addr) Generated {
	start := w.Len()
	var g Generated
	rule := func(chain string, parts ...string) {
		g.Rules++
		w.WriteString("-A ")
		w.WriteString(chain)
		for _, p := range parts {
			w.WriteByte(' ')
			w.WriteString(p)
		}
		w.WriteByte('\n')
	}
	w.WriteString("*nat\n")
	for _, c := range []string{ChainPortalsContainer, ChainPortalsHost, ChainNodePortContainer, ChainNodePortHost} {
		fmt.Fprintf(w, ":%s - [0:0]\n", c)
	}
	for _, p := range portals {
		if p.Action != Redirect {
			continue
		}
		sp := p.Service
		proto := sp.Protocol().Lower()
		comment := `-m comment --comment "` + sp.Name.String() + `"`
		port := strconv.Itoa(int(p.ProxyPort))
		toContainer := "-j REDIRECT --to-ports " + port
		toHost := toContainer
		if hostIP.IsValid() {
			toHost = "-j DNAT --to-destination " + netip.AddrPortFrom(hostIP, p.ProxyPort).String()
		}
		for _, ip := range serviceIPs(sp) {
			match := fmt.Sprintf("%s -p %s -d %s/32 --dport %d", comment, proto, ip, sp.Port)
			rule(ChainPortalsContainer, match, toContainer)
			rule(ChainPortalsHost, match, toHost)
		}
		if sp.NodePort != 0 {
			match := fmt.Sprintf("%s -p %s -m addrtype --dst-type LOCAL --dport %d", comment, proto, sp.NodePort)
			rule(ChainNodePortContainer, match, toContainer)
			rule(ChainNodePortHost, match, toHost)
		}
	}
	w.WriteString("COMMIT\n*filter\n")
	fmt.Fprintf(w, ":%s - [0:0]\n", ChainReject)
	for _, p := range portals {
		if p.Action == Redirect {
			continue
		}
		sp := p.Service
		proto := sp.Protocol().Lower()
		verdict, why := "-j REJECT", "has no endpoints"
		if sp.Protocol() == backends.TCP {
			verdict = "-j REJECT --reject-with tcp-reset"
		}
		if p.Action == Drop {
			verdict, why = "-j DROP", "has no local endpoints"
		}
		comment := `-m comment --comment "` + sp.Name.String() + " " + why + `"`
		for _, ip := range serviceIPs(sp) {
			rule(ChainReject, fmt.Sprintf("%s -p %s -d %s/32 --dport %d", comment, proto, ip, sp.Port), verdict)
		}
		if sp.NodePort != 0 {
			rule(ChainReject, fmt.Sprintf("%s -p %s -m addrtype --dst-type LOCAL --dport %d", comment, proto, sp.NodePort), verdict)
		}
	}
	w.WriteString("COMMIT\n")
	g.Bytes = w.Len() - start
	return g
}

// serviceIPs returns every address a service port answers on at its port: the ClusterIP,
// the externalIPs and the load-balancer IPs.
func serviceIPs(sp *backends.ServicePort) []netip.Addr {
	ips := make([]netip.Addr, 0, 1+len(sp.ExternalIPs)+len(sp.LoadBalancerIPs))
	ips = append(ips, sp.ClusterIP)
	ips = append(ips, sp.ExternalIPs...)
	return append(ips, sp.LoadBalancerIPs...)
}

// CleanupInput is the iptables-restore input that flushes and deletes every chain of this
// backend (the jumps into them must be gone first).
func CleanupInput() []byte {
	var w bytes.Buffer
	w.WriteString("*nat\n")
	nat := []string{ChainPortalsContainer, ChainPortalsHost, ChainNodePortContainer, ChainNodePortHost}
	for _, c := range nat {
		fmt.Fprintf(&w, ":%s - [0:0]\n", c)
	}
	for _, c := range nat {
		fmt.Fprintf(&w, "-X %s\n", c)
	}
	fmt.Fprintf(&w, "COMMIT\n*filter\n:%s - [0:0]\n-X %s\nCOMMIT\n", ChainReject, ChainReject)
	return w.Bytes()
}
