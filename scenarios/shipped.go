//go:build linux

package scenarios

import "kpbench.dev/kpbench/reports"

// shippedSteps are the step kinds kpbench ships, as data: name, role, documentation and the
// type of the step's value, whose file (step_<name>.go) defaults, validates and runs it.
func shippedSteps() []StepKind {
	return []StepKind{
		stepKind[ApplyStep, *ApplyStep]{name: "apply", role: RoleChange,
			doc: "Creates or updates objects, as `kubectl apply` does: Services, EndpointSlices, Deployments and Pods from manifest files or inline."},
		stepKind[DeleteStep, *DeleteStep]{name: "delete", role: RoleChange,
			doc: "Deletes objects: those of manifests, or one object named by kind and name."},
		stepKind[ScaleStep, *ScaleStep]{name: "scale", role: RoleChange,
			doc: "Sets a Deployment's replica count, as `kubectl scale` does."},
		stepKind[SetPodsStep, *SetPodsStep]{name: "setPods", role: RoleChange,
			doc: "Changes pods' conditions (ready, terminating), as failing readiness probes or a graceful deletion would."},
		stepKind[ChurnStep, *ChurnStep]{name: "churn", role: RoleChange,
			doc: "Generates Services (`svc-NNNNNN` in namespace `kpbench`, with EndpointSlices over shared pods) and changes them at a rate or all at once: the ladders of the benchmarks, and a mixed churn with a prober for programming latency and correctness."},
		stepKind[WaitStep, *WaitStep]{name: "wait", role: RoleWait,
			doc: "Waits until every node's proxy has programmed the current state (`synced: true`), or for a fixed duration."},
		stepKind[ExpectStep, *ExpectStep]{name: "expect", role: RoleExpect,
			doc: "Sends probes from one host (an external client, a node, a pod) to a target (a Service through one of its addresses, or a literal address) and checks the outcome; each expect step is a case of the results, pass or fail, with the evidence."},
		measureKind{},
	}
}

// shippedMeasurements are the measurements kpbench ships, as data: name, documentation,
// the reports measurements each records (their declarations live in reports) and the
// type of its params, whose file (measure_<name>.go) defaults, validates and takes it.
func shippedMeasurements() []Measurement {
	return []Measurement{
		// Metrics: the wall time of full and partial syncs is gated; the rest describes them.
		measurementKind[SyncParams, *SyncParams]{name: reports.MeasureSync,
			doc: "Times syncs of node 0's proxy: `full` rewrites everything on the current state, `partial` follows a change of one generated Service (the middle one). Records the wall time with its generate/apply split, a machine control (a fixed CPU work timed just before and after every sync), the tool's CPU time (backends that exec a tool), and the bytes, rules and Services written.",
			metrics: []string{reports.MeasureSync, reports.MeasureSyncGenerate, reports.MeasureSyncApply,
				reports.MeasureSyncApplyCPU, reports.MeasureSyncUnplannedFull, reports.MeasureSyncBytes,
				reports.MeasureSyncRules, reports.MeasureSyncChangedServices}},
		// Metrics: connect latency per position is gated (median and p99); the established control
		// describes the machine.
		measurementKind[LookupParams, *LookupParams]{name: reports.MeasureLookup,
			doc:     "First-packet cost: TCP connect latency from a host to the first, middle and last generated Service (positions in the rule order), interleaved, with the established-connection control: one request over a connection kept open, in every round right after its connects (established flows skip the Service rules; compare pairs sample i of each).",
			metrics: []string{reports.MeasureLookup}},
		// Metrics: the counts per endpoint, judged by their fit.
		measurementKind[DistributionParams, *DistributionParams]{name: reports.MeasureDistribution,
			doc:     "Opens new connections to a Service over `endpoints` of the generated pods (made once, named after every ladder Service) and counts them per endpoint, with a chi-square goodness of fit against the expected shares (uniform, IPVS weights, or one endpoint for sticky selection). Every result carries chi2, df, p_value, max_deviation and same_backend_share.",
			metrics: []string{reports.MeasureDistribution}},
		// Metrics: the rule count is exact and gated; the memory, one host-wide reading, is
		// informational.
		measurementKind[RulesParams, *RulesParams]{name: reports.MeasureRules,
			doc:     "Counts the rules the backend left in node 0's kernel (`-A` rules of iptables-save, rules and set elements of nft's table, IPVS virtual and real servers), and the kernel memory they occupy (growth since before the lab, host-wide).",
			metrics: []string{reports.MeasureRules, reports.MeasureRulesMemory}},
		// Metrics: the per-rule times describe a curve; they are not gated.
		measurementKind[PerRuleParams, *PerRuleParams]{name: reports.MeasurePerRule,
			doc:     "Adds generated Services one iptables call per rule and times each rule and each Service, at the table's current size or after a prefill to prefill Services with one iptables-restore; with restores, also times that many full and partial iptables-restore syncs of the same table (the 2017 curve; backends with per-rule timings only: iptables-perrule).",
			metrics: []string{reports.MeasurePerRule, reports.MeasurePerRuleService, reports.MeasurePerRuleRestore}},
		// Metrics: both halves are gated on their median and p99.
		measurementKind[ProgrammingLatencyParams, *ProgrammingLatencyParams]{name: reports.MeasureProgrammingLatency,
			doc:     "Programming latency, from a change's trigger time (its EndpointSlice's `endpoints.kubernetes.io/last-change-trigger-time`) to the end of the sync that carried it (half `sync`, as kube-proxy measures it) and, after a mixed churn with a prober, to the first probe that saw it (half `dataplane`). Without a probed churn, every change with a trigger time so far on every node. Needs such a change before it: a mixed churn, or pods behind a Service with a selector; the other churn patterns write no trigger time. With `mode: probed` it makes `samples` endpoint changes of a Service of its own and times each per node, from the API's acknowledgement to the first probe from that node answered by the new endpoint (half `api-to-probe`, label `node`): the mode for a real cluster (`--kubeconfig`), whose proxy keeps no records kpbench can read.",
			metrics: []string{reports.MeasureProgrammingLatency, reports.MeasureProgrammingLatencyDataplane}},
		// Metrics: churn figures are checked by limits, not by compare.
		measurementKind[ChurnParams, *ChurnParams]{name: "churn",
			doc: "What the last mixed churn with a prober saw: misroutes (connections to an endpoint a finished sync had removed), false refusals (a live Service refusing), other probe failures, the change rate achieved, and the probing node's syncs during the churn. Use `limits` to require 0 misroutes and 0 false refusals. It fails by itself when its prober probed live Services fewer than params.minLiveProbes times (default: once per change) or more than params.maxFailedShare of those probes timed out or were reset (default 1%).",
			metrics: []string{reports.MeasureChurnMisroutes, reports.MeasureChurnFalseRefusals,
				reports.MeasureChurnProbeFailures, reports.MeasureChurnRate, reports.MeasureChurnSync}},
		// Metrics: the rates are gated (higher is better); the latencies describe them.
		measurementKind[ThroughputParams, *ThroughputParams]{name: reports.MeasureThroughput,
			doc: "Loads a NodePort Service over `endpoints` of the generated pods (made once) from every host of `from` at once (pods and nodes use its ClusterIP, external clients node 0's node port): new connections per second and/or requests per second over kept-alive connections, with their latency and the machine's CPU during the load (net of an idle baseline). Its results are kept even when the load fails.",
			metrics: []string{reports.MeasureThroughputConnections, reports.MeasureThroughputRequests,
				reports.MeasureThroughputLatency}},
		// Metrics: the connect latency at every rank is gated on its median and p99; the control
		// describes the machine.
		measurementKind[FirstPacketParams, *FirstPacketParams]{name: reports.MeasureFirstPacket,
			doc:     "First-packet latency percentiles per position: TCP connect latency from a host to generated Services at `positions` evenly spaced ranks of the rule order (0% the first, 100% the last), interleaved so that drift hits every rank alike, with the established-connection control. Where lookup gives three points, this gives the curve: linear in the rank for iptables' chain walk, flat for nftables' maps and IPVS's hash.",
			metrics: []string{reports.MeasureFirstPacket}},
	}
}
