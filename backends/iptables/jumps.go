package iptables

// Jump is one rule in a built-in chain that sends traffic into kube-proxy's chains.
// kube-proxy installs these with `iptables -C` / `iptables -I` (never through restore, so
// that rules of other programs in the built-in chains are left alone).
type Jump struct {
	// Table and From are where the rule lives (a built-in chain); To is the target chain.
	Table, From, To string
	// Comment is the rule's comment; Extra are matches written before the comment.
	Comment string
	Extra   []string
}

// Args returns the rule's arguments after the chain name.
func (j Jump) Args() []string {
	args := append([]string(nil), j.Extra...)
	return append(args, "-m", "comment", "--comment", j.Comment, "-j", j.To)
}

// Jumps returns kube-proxy's jumps from the built-in chains (iptablesJumpChains), in the
// order they are ensured. Each is inserted at the top of its chain when missing.
func Jumps() []Jump {
	newOnly := []string{"-m", "conntrack", "--ctstate", "NEW"}
	return []Jump{
		{"filter", "INPUT", ChainExternalServices, "kubernetes externally-visible service portals", newOnly},
		{"filter", "FORWARD", ChainExternalServices, "kubernetes externally-visible service portals", newOnly},
		{"filter", "INPUT", ChainNodePorts, "kubernetes health check service ports", nil},
		{"filter", "FORWARD", ChainServices, "kubernetes service portals", newOnly},
		{"filter", "OUTPUT", ChainServices, "kubernetes service portals", newOnly},
		{"filter", "FORWARD", ChainForward, "kubernetes forwarding rules", nil},
		{"filter", "INPUT", ChainProxyFirewall, "kubernetes load balancer firewall", newOnly},
		{"filter", "OUTPUT", ChainProxyFirewall, "kubernetes load balancer firewall", newOnly},
		{"filter", "FORWARD", ChainProxyFirewall, "kubernetes load balancer firewall", newOnly},
		{"nat", "OUTPUT", ChainServices, "kubernetes service portals", nil},
		{"nat", "PREROUTING", ChainServices, "kubernetes service portals", nil},
		{"nat", "POSTROUTING", ChainPostrouting, "kubernetes postrouting rules", nil},
	}
}
