package reports

// The rules family: what a full sync leaves in the kernel.
const (
	// MeasureRules is the number of rules (or map elements, or IPVS servers) in the kernel
	// after a full sync; Params "services". Unit "count" (older files: "count" or
	// "bytes").
	MeasureRules = "rules"
	// MeasureRulesMemory is the kernel memory the rules of a full sync hold (unreclaimable
	// slab plus vmalloc growth since a settled baseline, host-wide); Params "services".
	// Unit "bytes".
	MeasureRulesMemory = "rules-memory"
)

// rulesMeasures declares the rules family.
func rulesMeasures() []Measure {
	rules := Metric{Measurement: MeasureRules, Title: "rules in the kernel", Unit: UnitCount, Better: LowerIsBetter,
		Gated: true, Test: TestExact, MinSamples: 1}
	memory := Metric{Measurement: MeasureRulesMemory, Title: "kernel memory of the rules", Unit: UnitBytes, Better: LowerIsBetter}
	return []Measure{
		{
			Name:      MeasureRulesMemory,
			Metrics:   []Metric{memory},
			Legacy:    []Metric{memory},
			questions: []question{{Title: "kernel memory of the rules", Stat: "p50"}},
			charts: []chartFunc{sizeChart{measurement: MeasureRulesMemory, unit: UnitBytes,
				file: "kernel-memory", title: "Kernel memory of the rules, by Services", y: "kernel memory (unreclaimable slab + vmalloc)",
				note: memoryNote}.draw},
		},
		{
			Name:      MeasureRules,
			Metrics:   []Metric{rules},
			Legacy:    []Metric{rules},
			BenchUnit: "rules",
			charts: []chartFunc{sizeChart{measurement: MeasureRules, unit: UnitCount,
				file: "rules", title: "Rules in the kernel after a full sync, by Services", y: "rules, elements or servers",
				note: fixedNote("What each mode holds in the kernel for the same Services: iptables rules; nftables rules and map elements; IPVS virtual and real servers; the userspace proxy's portal rules.")}.draw},
		},
	}
}

// memoryNote is the kernel memory chart's caption, which says why a point is missing.
func memoryNote(d *drawer, _ []point) string {
	note := "Growth of unreclaimable slab plus vmalloc since a settled baseline, read host-wide after a full sync: one sample per size, noisy. Lower is better."
	for _, pt := range points(d.r) {
		if pt.m.Name == MeasureRulesMemory && len(pt.m.Samples) > 0 && !pt.m.Measured() {
			note += " Missing points came out negative (other processes freed memory meanwhile): not measured."
			break
		}
	}
	return note
}
