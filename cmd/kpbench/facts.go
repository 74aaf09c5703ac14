package main

import "kpbench.dev/kpbench/scenarios"

// backendFacts answers the scenario validation's questions about backends before a lab
// exists. It is a stopgap until backends/all's facts registry answers them: the table
// below is what the backends' types implement today (ipvs.Backend's SetScheduler and
// SetWeights, perrule.Backend's RuleTimings).
type backendFacts struct{}

// Capable reports whether backend has the capability.
func (backendFacts) Capable(backend string, c scenarios.Capability) bool {
	return capabilities()[c][backend]
}

// capabilities lists, per capability, the backends that have it.
func capabilities() map[scenarios.Capability]map[string]bool {
	return map[scenarios.Capability]map[string]bool{
		scenarios.CapabilityIPVSExperiments: {"ipvs": true},
		scenarios.CapabilityPerRuleTimings:  {"iptables-perrule": true},
	}
}
