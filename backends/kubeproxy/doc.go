// Package kubeproxy runs the unmodified upstream kube-proxy as a kpbench backend, one
// process per lab node inside the node's network namespace, and normalises rule dumps so
// that our backends' rules and upstream's can be compared (`kpbench diff-rules`).
//
// # Backends
//
// kube-proxy-iptables, kube-proxy-nftables and kube-proxy-ipvs start
// `kube-proxy --config FILE` in the node's namespace with a generated
// KubeProxyConfiguration (see Config): the mode, the IPVS scheduler, minSyncPeriod and
// syncPeriod from the scenario, clusterCIDR, hostnameOverride = the node's name,
// metricsBindAddress = nodeIP:10249, healthzBindAddress = nodeIP:10256 and the lab's
// kubeconfig. kube-proxy reads Services and EndpointSlices from the lab's API server
// itself, so Sync writes nothing: it waits (bounded) until kube-proxy has programmed what
// the API holds, judged from kube-proxy's own metrics, scraped from inside the namespace.
//
// The lab is IPv4-only, and kube-proxy runs single-stack: IPv6 is disabled in the node's
// namespace before it starts, because dual-stack its pending-change gauges cannot be
// trusted (see singleStack). Every upstream sync figure is therefore the IPv4 proxier's
// alone, like our backends', which program IPv4 only.
//
// # Metric mapping
//
// Between two calls of Sync, the change of kube-proxy's counters gives the SyncResult:
//
//	SyncResult.Apply    = delta of kubeproxy_sync_proxy_rules_duration_seconds_sum
//	                      (the time kube-proxy spent in syncProxyRules, summed over the
//	                      syncs it ran for this change)
//	SyncResult.Full     = delta of kubeproxy_sync_full_proxy_rules_duration_seconds_count > 0
//	SyncResult.Rules    = kubeproxy_sync_proxy_rules_iptables_total summed over tables
//	                      (iptables mode; kube-proxy v1.37 exposes no count for nftables,
//	                      so it is 0 there: count the kernel's rules with measure rules)
//	SyncResult.Generate = 0 (kube-proxy does not separate generation from application)
//
// The agent's record of the sync (start of Sync to the end of kube-proxy's sync that
// carried the change, dated by kube-proxy's own last-sync timestamp; SyncResult.Confirm is
// the rest of the wait, the scrapes and quiet period that confirmed it) is the wall time
// from the change being in our store to kube-proxy having programmed it: publication to
// the API server, the watch, kube-proxy's minSyncPeriod (none by default, as for our
// agents: see Config.MinSyncPeriod) and its sync. That is what programming latency
// means for upstream, so the bench's network-programming figures compare like with like.
// For an EndpointSlice change it equals kube-proxy's own
// kubeproxy_network_programming_duration_seconds (observed from the slice's
// endpoints.kubernetes.io/last-change-trigger-time, as our agents do) to well under a
// millisecond, which a test checks. For sync times, compare SyncResult.Apply (upstream's
// own sync duration) with our backends' Apply+Generate.
//
// A forced full sync (ForceFullSync, used by the full-sync measurement) restarts the
// kube-proxy process: a new kube-proxy always starts with a full sync over the rules its
// predecessor left, which is what our full sync does too.
package kubeproxy
