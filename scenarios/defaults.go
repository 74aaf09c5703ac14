package scenarios

import (
	"time"

	"kpbench.dev/kpbench/lab/manifest"
)

// Topology and step defaults.
const (
	DefaultNodes            = 1
	DefaultPodsPerNode      = 110
	DefaultClients          = 1
	DefaultNodeCIDR         = "172.18.0.0/24"
	DefaultPodCIDR          = "10.244.0.0/16"
	DefaultServiceCIDR      = "10.96.0.0/12"
	DefaultLoadBalancerPool = "172.18.1.0/24"
	DefaultNodePortRange    = "30000-32767"
	DefaultWaitTimeout      = 60 * time.Second
	DefaultExpectTimeout    = 30 * time.Second
	DefaultChurnPort        = 80
)

// Default fills every unset field with its default. It is idempotent and does no I/O;
// ProxyConfig is defaulted from Proxy's inline fields unless Proxy names a file (Load
// reads that file first).
func (s *Scenario) Default() {
	t := &s.Topology
	if t.Nodes == 0 {
		t.Nodes = DefaultNodes
	}
	if t.PodsPerNode == 0 {
		t.PodsPerNode = DefaultPodsPerNode
	}
	if t.Clients == nil {
		c := DefaultClients
		t.Clients = &c
	}
	setString(&t.NodeCIDR, DefaultNodeCIDR)
	setString(&t.PodCIDR, DefaultPodCIDR)
	setString(&t.ServiceCIDR, DefaultServiceCIDR)
	setString(&t.LoadBalancerPool, DefaultLoadBalancerPool)
	setString(&t.NodePortRange, DefaultNodePortRange)

	if s.Proxy != nil && s.Proxy.ProxyConfigFile == "" {
		s.ProxyConfig = s.Proxy.ProxyConfig
	}
	s.ProxyConfig.Default()
	setString(&s.ProxyConfig.ClusterCIDR, t.PodCIDR)

	for i := range s.Steps {
		st := &s.Steps[i]
		switch {
		case st.Delete != nil:
			if st.Delete.Kind != "" {
				setString(&st.Delete.Namespace, manifest.DefaultNamespace)
			}
		case st.SetPods != nil:
			setString(&st.SetPods.Namespace, manifest.DefaultNamespace)
		case st.Churn != nil:
			tp := &st.Churn.Template
			if tp.Port == 0 {
				tp.Port = DefaultChurnPort
			}
			setString(&tp.Protocol, "TCP")
			setString(&tp.Type, "ClusterIP")
		// A wait's timeout stays unset: the runner applies RunOptions.WaitTimeout, else
		// DefaultWaitTimeout, so that a slow machine can lengthen the default alone.
		case st.Expect != nil:
			e := st.Expect
			if e.Timeout == nil {
				e.Timeout = NewDuration(DefaultExpectTimeout)
			}
			if e.Count == 0 {
				switch e.Expectation {
				case ExpectAllEndpoints, ExpectSameBackend, ExpectDistribution:
					e.Count = 100
				default:
					e.Count = 1
				}
			}
			if e.To.Service != "" {
				setString(&e.To.Address, AddressClusterIP)
				if e.To.Address == AddressNodePort {
					setString(&e.To.Node, "node-0")
				}
			}
		}
	}
}

func setString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}
