package reports

// The per-rule curve's measurements (scenarios/perrule.yaml on iptables-perrule).
const (
	// MeasurePerRuleService is the time to add one Service one iptables call per rule
	// (the wall time of the syncs that add it); Params "services", the generated
	// Services before it. Unit "s".
	MeasurePerRuleService = "perrule-service"
	// MeasurePerRuleRestore is a sync of the same table with one iptables-restore;
	// Params "kind" (full or partial) and "services". Unit "s".
	MeasurePerRuleRestore = "perrule-restore"
)
