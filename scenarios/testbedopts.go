package scenarios

import (
	"net/netip"

	"kpbench.dev/kpbench/backends/all"
	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/cluster/testbed"
	"kpbench.dev/kpbench/manifest"
)

// LabelIPTablesCache is the run label of the iptables backend run with
// backendOptions.iptables.wholeTableCache ("whole-table"): its restores are not
// kube-proxy's, and reports and compare say so.
const LabelIPTablesCache = "iptables-cache"

// TestbedOptions builds the testbed of the scenario for backend, in a lab named labName:
// topology, CIDRs, node port range, the proxy configuration (masquerade, scheduler, and the
// sync periods of the backend's mode) and the scenario's backendOptions.
func (sc *Scenario) TestbedOptions(backend, labName string) (testbed.Options, error) {
	t := sc.Topology
	pc := sc.ProxyConfig
	o := testbed.Options{Backend: backend, ProbePods: true}
	o.Lab.Name = labName
	o.Lab.Nodes = t.Nodes
	o.Lab.PodCapacity = t.podCapacity()
	if t.Clients != nil {
		o.Lab.Clients = *t.Clients
	}
	var err error
	parse := func(s string, into *netip.Prefix) {
		if s != "" && err == nil {
			*into, err = netip.ParsePrefix(s)
		}
	}
	parse(t.NodeCIDR, &o.Lab.NodeCIDR)
	parse(t.PodCIDR, &o.Lab.PodCIDR)
	parse(t.ServiceCIDR, &o.ServiceCIDR)
	parse(t.LoadBalancerPool, &o.LoadBalancerPool)
	parse(pc.ClusterCIDR, &o.View.ClusterCIDR)
	if err != nil {
		return o, err
	}
	if t.NodePortRange != "" {
		pr, err := manifest.ParsePortRange(t.NodePortRange)
		if err != nil {
			return o, err
		}
		o.NodePortMin, o.NodePortMax = int32(pr.Min), int32(pr.Max)
	}
	o.View.MasqueradeAll = pc.IPTables.MasqueradeAll
	if pc.IPTables.MasqueradeBit != nil {
		o.Settings.MasqueradeBit = int(*pc.IPTables.MasqueradeBit)
	}
	o.Settings.Scheduler = pc.IPVS.Scheduler
	if bo := sc.BackendOptions; bo != nil {
		o.Settings.IPTablesWholeTableCache = bo.IPTables.WholeTableCache
	}
	minSync, sync := pc.IPTables.MinSyncPeriod, pc.IPTables.SyncPeriod
	f, _ := all.Lookup(backend) // the section of the backend's mode configures it
	switch f.Mode {
	case kubeproxy.ModeNFTables:
		minSync, sync = pc.NFTables.MinSyncPeriod, pc.NFTables.SyncPeriod
	case kubeproxy.ModeIPVS:
		minSync, sync = pc.IPVS.MinSyncPeriod, pc.IPVS.SyncPeriod
	}
	if minSync != nil {
		o.MinSyncPeriod = minSync.Duration
	}
	if sync != nil {
		o.SyncPeriod = sync.Duration
	}
	return o, nil
}
