package scenarios

import (
	"time"

	"kpbench.dev/kpbench/apistore"
)

// Topology and step defaults.
const (
	DefaultNodes         = 1
	DefaultPodsPerNode   = 110
	DefaultClients       = 1
	DefaultNodeCIDR      = "172.18.0.0/24"
	DefaultPodCIDR       = "10.244.0.0/16"
	DefaultServiceCIDR   = "10.96.0.0/12"
	DefaultNodePortRange = "30000-32767"
	DefaultWaitTimeout   = 60 * time.Second
	DefaultExpectTimeout = 30 * time.Second
	DefaultChurnPort     = 80
)

// Default fills every unset field with its default. It is idempotent and does no I/O;
// ProxyConfig is defaulted from Proxy's inline fields unless Proxy names a file (Load
// reads that file first).
func (s *Scenario) Default() {
	t := &s.Topology
	setDefault(&t.Nodes, DefaultNodes)
	setDefault(&t.PodsPerNode, DefaultPodsPerNode)
	if t.Clients == nil {
		c := DefaultClients
		t.Clients = &c
	}
	setDefault(&t.NodeCIDR, DefaultNodeCIDR)
	setDefault(&t.PodCIDR, DefaultPodCIDR)
	setDefault(&t.ServiceCIDR, DefaultServiceCIDR)
	setDefault(&t.LoadBalancerPool, apistore.DefaultLoadBalancerPool.String())
	setDefault(&t.NodePortRange, DefaultNodePortRange)

	if s.Proxy != nil && s.Proxy.ProxyConfigFile == "" {
		s.ProxyConfig = s.Proxy.ProxyConfig
	}
	s.ProxyConfig.Default()
	setDefault(&s.ProxyConfig.ClusterCIDR, t.PodCIDR)

	for _, st := range s.Steps {
		if st.Action != nil {
			st.Action.Default()
		}
	}
}

// setDefault sets *p to def when it is unset (the zero value).
func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
