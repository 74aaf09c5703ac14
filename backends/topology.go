package backends

// Categorized is the outcome of CategorizeEndpoints: which endpoints the cluster-wide and
// the node-local paths of a service port use, as kube-proxy's CategorizeEndpoints decides.
type Categorized struct {
	// Cluster are the endpoints for traffic with Cluster policy (nil: that path is unused).
	Cluster []Endpoint
	// Local are the endpoints for traffic with Local policy (nil: that path is unused).
	Local []Endpoint
	// All is the union of Cluster and Local (every endpoint that gets a chain), sorted.
	All []Endpoint
	// HasAnyEndpoints is true when the port has endpoints that could take traffic at all,
	// before policy filtering; false means "reject" rather than "drop".
	HasAnyEndpoints bool
}

// PolicyChains is where a service port's traffic goes, as kube-proxy's syncProxyRules
// decides it: internal traffic (to the cluster IP) and external traffic (to node ports,
// external and load-balancer IPs) each jump to the local policy chain under a Local
// policy, else to the cluster policy chain.
type PolicyChains struct {
	// Internal and External are the chains internal and external traffic jump to.
	Internal, External string
	// HasInternal and HasExternal are false when that traffic has no endpoint to go to:
	// the port has none at all (the rules reject), or its policy is Local and this node
	// has none (they drop).
	HasInternal, HasExternal bool
}

// PolicyChains chooses, between the port's cluster and local policy chains (named by the
// backend), where sp's internal and external traffic go, c being sp's categorized endpoints.
func (c Categorized) PolicyChains(sp *ServicePort, clusterChain, localChain string) PolicyChains {
	p := PolicyChains{Internal: clusterChain, External: clusterChain, HasInternal: c.HasAnyEndpoints, HasExternal: c.HasAnyEndpoints}
	if sp.InternalPolicyLocal {
		p.Internal, p.HasInternal = localChain, p.HasInternal && len(c.Local) > 0
	}
	if sp.UsesLocalExternal() {
		p.External, p.HasExternal = localChain, p.HasExternal && len(c.Local) > 0
	}
	return p
}

// usable returns the endpoints traffic may go to: the ready ones, or, when none is ready,
// those both serving and terminating (kube-proxy's terminating fallback).
func usable(eps []Endpoint, keep func(Endpoint) bool) []Endpoint {
	var ready, fallback []Endpoint
	for _, ep := range eps {
		if !keep(ep) {
			continue
		}
		if ep.Ready {
			ready = append(ready, ep)
		} else if ep.Serving && ep.Terminating {
			fallback = append(fallback, ep)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return fallback
}

// CategorizeEndpoints splits a service port's endpoints into the cluster-wide and local sets,
// applying readiness (ready first, else serving and terminating) and traffic policies.
// Topology hints are not modelled.
func CategorizeEndpoints(sp *ServicePort) Categorized {
	any := func(Endpoint) bool { return true }
	local := func(ep Endpoint) bool { return ep.IsLocal }
	var c Categorized
	// kube-proxy's UsesClusterEndpoints: an externally accessible port needs its cluster
	// endpoints even when both policies are Local (its external chain short-circuits pod
	// and node traffic to the cluster-wide chain).
	needCluster := !sp.InternalPolicyLocal || sp.ExternallyAccessible()
	needLocal := sp.InternalPolicyLocal || sp.UsesLocalExternal()
	if needCluster {
		c.Cluster = usable(sp.Endpoints, any)
		if c.Cluster == nil {
			c.Cluster = []Endpoint{}
		}
	}
	if needLocal {
		c.Local = usable(sp.Endpoints, local)
		if c.Local == nil {
			c.Local = []Endpoint{}
		}
	}
	c.HasAnyEndpoints = len(usable(sp.Endpoints, any)) > 0
	seen := map[Endpoint]bool{}
	for _, set := range [][]Endpoint{c.Cluster, c.Local} {
		for _, ep := range set {
			if !seen[ep] {
				seen[ep] = true
				c.All = append(c.All, ep)
			}
		}
	}
	sortEndpoints(c.All)
	return c
}
