package reports

import (
	"slices"
)

// Every measurement name kpbench records is defined in this package, once, in the file of
// its family (measure_sync.go, measure_lookup.go, ...), together with everything the
// reports and compare do with it: its declarations (unit, better direction, gated or not,
// how compare judges it, the samples a verdict needs, its control), the declarations
// files written before results carried any are read with, its rows of the answers table,
// its charts, and how bench.txt names it. The report code iterates Measures; it does not
// switch on names. The engine (scenarios) records measurements by these names and
// declares them with MetricsOf.

// Measure is one measurement name and what reports and compare do with it.
type Measure struct {
	// Name is the Measurement.Name ("sync").
	Name string
	// Metrics declare what runs record under Name today (one per Match), in the order the
	// scenario format's documentation lists them.
	Metrics []Metric
	// Legacy declare the measurements of files written before results carried
	// declarations (Results.Metrics empty). They describe those files, so they do not
	// change when Metrics do. None: the measurement did not exist then, and such files
	// are read by the unit's rule.
	Legacy []Metric
	// Series marks a measurement whose samples are not repeats of one figure (a count per
	// endpoint, a growing series of adds): it is drawn, never tabulated by its median,
	// and none of its samples is an outlier.
	Series bool
	// BenchUnit is the unit of its counts in bench.txt ("rules", "hits"); empty: the
	// unit's ("count" for counts).
	BenchUnit string
	// BenchName is its benchmark name in bench.txt without "Benchmark" ("PerRule");
	// empty: Name in camel case.
	BenchName string
	// SampleParam, when set, names the parameter that tells a measurement's samples
	// apart in bench.txt (a distribution's "endpoint": sample i is endpoint i).
	SampleParam string

	// questions are its rows of the answers table.
	questions []question
	// charts draw its figures, in the order report.html shows them.
	charts []chartFunc
}

// chartFunc draws the figures of one measurement from a drawer's results; no figure
// when the results hold nothing to draw.
type chartFunc func(d *drawer) ([]Figure, error)

// Measures returns every measurement kpbench records, in the order of the answers table
// and the charts of report.html. Each call returns a fresh table.
func Measures() []Measure {
	return slices.Concat(
		syncMeasures(),
		lookupMeasures(),
		programmingMeasures(),
		throughputMeasures(),
		rulesMeasures(),
		distributionMeasures(),
		perRuleMeasures(),
		controlPlaneMeasures(),
	)
}

// measureNamed returns the measure called name among ms.
func measureNamed(ms []Measure, name string) (Measure, bool) {
	i := slices.IndexFunc(ms, func(m Measure) bool { return m.Name == name })
	if i < 0 {
		return Measure{}, false
	}
	return ms[i], true
}

// MetricsOf returns the declarations of the measurements named, in that order: what a
// scenario measurement that records them declares. An unknown name is a programming
// error, and panics.
func MetricsOf(names ...string) []Metric {
	ms := Measures()
	var out []Metric
	for _, n := range names {
		m, ok := measureNamed(ms, n)
		if !ok {
			panic("reports: no measurement named " + n + " (declare it in a measure_*.go file of reports)")
		}
		out = append(out, m.Metrics...)
	}
	return out
}

// LegacyMetrics are the declarations of the measurements kpbench recorded before results
// files carried their own (Results.Metrics empty): compare and reports read such files
// with these.
func LegacyMetrics() []Metric {
	var out []Metric
	for _, m := range Measures() {
		out = append(out, m.Legacy...)
	}
	return out
}
