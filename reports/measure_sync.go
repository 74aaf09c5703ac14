package reports

// The sync family: the wall time of one Backend.Sync, its parts, and the machine control
// timed around it.
const (
	// MeasureSync is the wall time of one Backend.Sync; Params "kind" is "full" or
	// "partial" (or "full-control", "partial-control": the machine control, see
	// SyncControl), "services" the number of Services. Unit "s".
	MeasureSync = "sync"
	// MeasureSyncGenerate is the time a sync spent building the rules in our code. Unit "s".
	MeasureSyncGenerate = "sync-generate"
	// MeasureSyncApply is the wall time of writing them to the kernel (the tool's run).
	// Unit "s".
	MeasureSyncApply = "sync-apply"
	// MeasureSyncApplyCPU is the CPU time of the tool that wrote them (only backends that
	// exec a tool measure it). Unit "s".
	MeasureSyncApplyCPU = "sync-apply-cpu"
	// MeasureSyncUnplannedFull is the wall time of the full syncs the proxy did where a
	// partial one was timed (absent when there were none). Unit "s".
	MeasureSyncUnplannedFull = "sync-unplanned-full"
	// MeasureSyncBytes is the size of what a sync wrote. Unit "bytes".
	MeasureSyncBytes = "sync-bytes"
	// MeasureSyncRules is the number of rules a sync wrote. Unit "count".
	MeasureSyncRules = "sync-rules"
	// MeasureSyncChangedServices is the number of Services a sync rewrote. Unit "count".
	MeasureSyncChangedServices = "sync-changed-services"
)

// ControlSuffix ends the kind of a sync's machine control: "full-control" is measured
// around every full sync, "partial-control" around every partial one.
const ControlSuffix = "-control"

// SyncControl returns the Control of the sync declaration of kind (full, partial): the
// machine control timed around every sync of that kind.
func SyncControl(kind string) map[string]string {
	return map[string]string{"kind": kind + ControlSuffix}
}

// syncMeasures declares the sync family.
func syncMeasures() []Measure {
	gated := func(kind, title string, control map[string]string) Metric {
		return Metric{Measurement: MeasureSync, Match: map[string]string{"kind": kind}, Title: title, Unit: UnitSeconds,
			Better: LowerIsBetter, Gated: true, Test: TestLocation, MinSamples: 5, Statistics: []string{"p50"}, Control: control}
	}
	control := func(kind, title string) Metric {
		return Metric{Measurement: MeasureSync, Match: map[string]string{"kind": kind + ControlSuffix}, Title: title, Unit: UnitSeconds,
			Better: LowerIsBetter}
	}
	info := func(name, unit, title string) Measure {
		return Measure{Name: name, Metrics: []Metric{{Measurement: name, Title: title, Unit: unit, Better: LowerIsBetter}}}
	}
	syncChart := func(kind, file, title string) chartFunc {
		return sizeChart{measurement: MeasureSync, match: map[string]string{"kind": kind}, unit: UnitSeconds, log: true,
			file: file, title: title, y: "sync time (log scale)",
			note: func(_ *drawer, ps []point) string { return tailNote(ps) + " Lower is better." }}.draw
	}
	return []Measure{
		{
			Name: MeasureSync,
			Metrics: []Metric{
				gated("full", "full sync", SyncControl("full")),
				gated("partial", "partial sync", SyncControl("partial")),
				control("full", "machine control beside full syncs"),
				control("partial", "machine control beside partial syncs"),
			},
			// Files of that time had no machine control.
			Legacy: []Metric{gated("full", "full sync", nil), gated("partial", "partial sync", nil)},
			questions: []question{
				{Title: "full sync", Match: map[string]string{"kind": "full"}, Stat: "p50"},
				{Title: "partial sync (one Service changed)", Match: map[string]string{"kind": "partial"}, Stat: "p50"},
			},
			charts: []chartFunc{
				syncChart("full", "sync-full", "Full sync: time to write every rule, by Services"),
				syncChart("partial", "sync-partial", "Partial sync: time to program one changed Service, by Services in the table"),
			},
		},
		info(MeasureSyncGenerate, UnitSeconds, "sync: building the rules"),
		info(MeasureSyncApply, UnitSeconds, "sync: writing them to the kernel"),
		info(MeasureSyncApplyCPU, UnitSeconds, "sync: the tool's CPU time"),
		info(MeasureSyncUnplannedFull, UnitSeconds, "sync: full syncs where a partial one was timed"),
		info(MeasureSyncBytes, UnitBytes, "sync: bytes written"),
		info(MeasureSyncRules, UnitCount, "sync: rules written"),
		info(MeasureSyncChangedServices, UnitCount, "sync: Services rewritten"),
	}
}
