//go:build linux

package scenarios

import "kpbench.dev/kpbench/backends/all"

// RegistryFacts answers BackendFacts from the backends' facts registry (backends/all),
// where each backend declares what it can do.
type RegistryFacts struct{}

// Capable reports whether backend (a reference such as "ipvs" or
// "kube-proxy-nftables@v1.33.5") has the capability; an unknown backend has none.
func (RegistryFacts) Capable(backend string, c Capability) bool {
	f, ok := all.Lookup(backend)
	if !ok {
		return false
	}
	return capabilityOf(f.Caps, c)
}

// capabilityOf reads one capability of a backend's declared capabilities.
func capabilityOf(caps all.Capabilities, c Capability) bool {
	has := map[Capability]bool{
		CapabilityIPVSExperiments: caps.IPVSExperiments,
		CapabilityPerRuleTimings:  caps.PerRuleTiming,
	}
	return has[c]
}
