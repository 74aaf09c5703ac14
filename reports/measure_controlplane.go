package reports

// Measurements of the lab's real control plane (kubestack/controlplane), when the testbed
// started one.
const (
	// MeasureControlPlaneStartup is the time until etcd and then kube-apiserver answered
	// ready; Params "component". Unit "s".
	MeasureControlPlaneStartup = "control-plane-startup"
	// MeasureControlPlaneMemory is their resident memory once ready and at the end;
	// Params "component". Unit "bytes".
	MeasureControlPlaneMemory = "control-plane-memory"
)

// controlPlaneMeasures declares the control plane's measurements.
func controlPlaneMeasures() []Measure {
	return []Measure{
		{Name: MeasureControlPlaneStartup, Metrics: []Metric{{Measurement: MeasureControlPlaneStartup, Title: "control plane start-up", Unit: UnitSeconds, Better: LowerIsBetter}}},
		{Name: MeasureControlPlaneMemory, Metrics: []Metric{{Measurement: MeasureControlPlaneMemory, Title: "control plane resident memory", Unit: UnitBytes, Better: LowerIsBetter}}},
	}
}
