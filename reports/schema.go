// Package reports holds kpbench's result schema and everything drawn from it: the
// versioned results.json, Go benchmark text (bench.txt, for benchstat), CSV, JUnit XML,
// plots (PNG and SVG), a self-contained report.html, a terminal summary, and Compare, the
// yes/no of CI between two runs.
//
// Everything is drawn from a saved *Results, so a report can be redrawn without rerunning
// (kpbench report DIR). The schema is documented field by field in SCHEMA.md.
package reports

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"kpbench.dev/kpbench/internal/fsutil"
	"kpbench.dev/kpbench/reports/stats"
)

// SchemaVersion names the format of results.json. It changes when a field changes meaning
// or is removed; adding a field keeps it.
const SchemaVersion = "kpbench.dev/results/v1"

// ResultsFile is the name of the results file inside a run directory.
const ResultsFile = "results.json"

// Results is one run of a scenario: where it ran, what was measured on which backend, and
// which expectations held. It is written as DIR/results.json.
type Results struct {
	// SchemaVersion is SchemaVersion for files this package writes; Load refuses others.
	SchemaVersion string `json:"schemaVersion"`
	// Environment describes the machine, kernel and tools the run used.
	Environment Environment `json:"environment"`
	// Scenario is the scenario's name (or file) that produced the run.
	Scenario string `json:"scenario"`
	// Started and Finished are the wall-clock bounds of the run.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Runs holds the measurements, one Run per backend (and label set).
	Runs []Run `json:"runs"`
	// Cases holds the expectation and conformance outcomes.
	Cases []Case `json:"cases,omitempty"`
	// Metrics declares every measurement of Runs: unit, better direction, gated or not,
	// the samples a verdict needs (metric.go). Files written before declarations existed
	// have none; readers then take the declarations of the measurement registry.
	Metrics []Metric `json:"metrics,omitempty"`
}

// Environment records what a run's figures depend on, so that two runs can be told apart
// and compared honestly. Every string is as the tool printed it, trimmed.
type Environment struct {
	// Kernel is the kernel name (uname -s), e.g. "Linux".
	Kernel string `json:"kernel"`
	// KernelRelease is the kernel release (uname -r), e.g. "6.18.0".
	KernelRelease string `json:"kernelRelease"`
	// IPTablesVersion is the first line of `iptables --version`,
	// e.g. "iptables v1.8.9 (nf_tables)".
	IPTablesVersion string `json:"iptablesVersion,omitempty"`
	// NFTVersion is the first line of `nft --version`, e.g. "nftables v1.0.6 (Lester Gooch #5)".
	NFTVersion string `json:"nftVersion,omitempty"`
	// IPTablesRestoreVersion is the first line of `iptables-restore --version`,
	// e.g. "iptables-restore v1.8.9 (nf_tables)".
	IPTablesRestoreVersion string `json:"iptablesRestoreVersion,omitempty"`
	// Tools names the userspace tools the backends ran (--tools): "host", or a prepared
	// root such as "debian:trixie"; empty in results written before --tools existed (the
	// host's). The three versions above are those of these tools, read as the backends
	// run them.
	Tools string `json:"tools,omitempty"`
	// ToolRoot is the root directory of Tools ("" for the host's tools).
	ToolRoot string `json:"toolRoot,omitempty"`
	// Cores is the number of CPUs the process may use (runtime.NumCPU).
	Cores int `json:"cores"`
	// MemoryBytes is MemTotal from /proc/meminfo, in bytes.
	MemoryBytes int64 `json:"memoryBytes"`
	// KpbenchCommit is the git commit kpbench was built from ("unknown" if not stamped).
	KpbenchCommit string `json:"kpbenchCommit"`
	// GoVersion is the Go toolchain kpbench was built with (runtime.Version).
	GoVersion string `json:"goVersion"`
	// Hostname is the machine's host name.
	Hostname string `json:"hostname"`
	// Accelerator tells how the kernel ran: "native" (bare metal or the host kernel),
	// "kvm" (a hardware-accelerated VM) or "tcg" (QEMU emulation, figures not comparable
	// with the others).
	Accelerator string `json:"accelerator"`
	// Date is when the environment was collected.
	Date time.Time `json:"date"`
	// Cluster describes the cluster a run went to instead of a lab (kpbench run
	// --kubeconfig); nil for the lab.
	Cluster *ClusterEnvironment `json:"cluster,omitempty"`
}

// ClusterEnvironment is what a run knows of a real cluster.
type ClusterEnvironment struct {
	// ServerVersion is the API server's version, e.g. "v1.37.2".
	ServerVersion string `json:"serverVersion"`
	// Nodes is the number of Ready, schedulable nodes.
	Nodes int `json:"nodes"`
	// ProxyMode is kube-proxy's /proxyMode answer ("" when none answered).
	ProxyMode string `json:"proxyMode,omitempty"`
	// ProxyModeNote says why the mode is unknown.
	ProxyModeNote string `json:"proxyModeNote,omitempty"`
}

// Run is the measurements of one backend under one set of labels.
type Run struct {
	// Backend is the backend's name as the factory knows it: "iptables",
	// "iptables-legacy", "nftables", "ipvs", "iptables-perrule".
	Backend string `json:"backend"`
	// Labels are free-form facts about the run (e.g. "services": "20000",
	// "kernel": "6.18"). They are shown in reports, not used to match metrics.
	Labels map[string]string `json:"labels,omitempty"`
	// Measurements are the measured quantities, raw samples included.
	Measurements []Measurement `json:"measurements"`
}

// ExtraInterleaved, set to 1 in a control measurement's Extra, says the control was taken
// interleaved with the figures it controls: its sample i in the same round (lookups) or
// around the same sync (syncs) as their sample i. compare then judges the per-sample
// ratio figure/control. Controls without it (files written before) were taken after the
// figures, and compare compares their medians only.
const ExtraInterleaved = "interleaved"

// Units of Measurement.Unit.
const (
	// UnitSeconds is wall time in seconds. Larger is worse.
	UnitSeconds = "s"
	// UnitCount is a number of things (rules, hits). Neither better nor worse.
	UnitCount = "count"
	// UnitBytes is a size in bytes. Neither better nor worse for compare.
	UnitBytes = "bytes"
	// UnitPerSecond is a rate per second. Smaller is worse.
	UnitPerSecond = "1/s"
)

// Measurement is one measured quantity at one point of the parameter space, with every
// raw sample.
type Measurement struct {
	// Name is what was measured: one of the Measure* constants (Measures lists them).
	Name string `json:"name"`
	// Params locate the point: "services" (number of Services), "kind" (full, partial),
	// "position" (first, middle, last, established), "expected" ... Values are strings
	// so that they print as they were configured; "services" must be an integer.
	Params map[string]string `json:"params,omitempty"`
	// Unit is the unit of Samples and Summary: "s", "count", "bytes" or "1/s".
	Unit string `json:"unit"`
	// Samples are the raw values, in the order they were taken. Always kept.
	Samples []float64 `json:"samples"`
	// Summary is Summarize(Samples), stored for readers without this package; Load
	// recomputes it when it is missing.
	Summary stats.Summary `json:"summary"`
	// Extra holds derived figures that are not samples, e.g. "chi2", "df", "p_value"
	// of a distribution.
	Extra map[string]float64 `json:"extra,omitempty"`
	// Step names the scenario step that took the samples (set by the runner; empty in
	// files written before it was recorded).
	Step string `json:"step,omitempty"`
	// Start and End bound the wall-clock window of that step (zero when not recorded).
	// A sample far from the rest is reported with this window when Offsets is absent.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Offsets, when the measurement records them, holds one value per sample: the
	// seconds from Start at which sample i ended, so that an outlier can be dated.
	Offsets []float64 `json:"offsets,omitempty"`
	// Informational, when set, says why this figure is shown but never judged: its
	// scenario's measure step declared it so, because the samples a verdict needs do not
	// fit the scenario's budget (a full sync at 10,000 Services taken once). compare and
	// the gates treat its declaration as not gated; reports mark it.
	Informational string `json:"informational,omitempty"`
}

// Measured reports whether m holds a figure: samples, for a duration not only zeros, for
// a size no negative one. Older runs recorded the tool CPU of backends that do not
// measure it as 0 s, and kernel memory is a host-wide growth that other
// processes can make negative; neither is a measurement, and reports show "—".
func (m *Measurement) Measured() bool {
	if len(m.Samples) == 0 {
		return false
	}
	if m.Unit == UnitBytes {
		return !slices.ContainsFunc(m.Samples, func(v float64) bool { return v < 0 })
	}
	if m.Unit != UnitSeconds {
		return true
	}
	for _, v := range m.Samples {
		if v != 0 {
			return true
		}
	}
	return false
}

// SampleTime returns when sample i ended, from Offsets, and false when the measurement
// did not record per-sample times.
func (m *Measurement) SampleTime(i int) (time.Time, bool) {
	if m.Start.IsZero() || len(m.Offsets) != len(m.Samples) || i < 0 || i >= len(m.Offsets) {
		return time.Time{}, false
	}
	return m.Start.Add(time.Duration(m.Offsets[i] * float64(time.Second))), true
}

// Summarize computes the stats.Summary of samples (percentiles, mean, sample standard
// deviation, 95% confidence interval of the mean). The type lives in reports/stats
// because this package's Summary is the terminal table.
func Summarize(samples []float64) stats.Summary { return stats.Summarize(samples) }

// Case outcomes.
const (
	// CasePass means the expectation held.
	CasePass = "pass"
	// CaseFail means it did not; Reason and Evidence say why.
	CaseFail = "fail"
	// CaseSkip means it was not checked (unsupported by the backend, missing tool...).
	CaseSkip = "skip"
)

// Case is the outcome of one expectation or conformance check on one backend.
type Case struct {
	// Name is an e2e-style test name, e.g.
	// "[sig-network] Services should serve a basic endpoint from pods".
	Name string `json:"name"`
	// Backend is the backend the case ran against.
	Backend string `json:"backend"`
	// Result is "pass", "fail" or "skip".
	Result string `json:"result"`
	// Reason is a one-line why for fail and skip.
	Reason string `json:"reason,omitempty"`
	// Evidence is what was observed (answers, counts, rule excerpts), possibly multi-line.
	Evidence string `json:"evidence,omitempty"`
	// Duration is how long the case took (JSON: nanoseconds).
	Duration time.Duration `json:"duration"`
}

// countCases counts the cases of backend ("": every backend) by result.
func countCases(cases []Case, backend string) (pass, fail, skip int) {
	for _, c := range cases {
		if backend != "" && c.Backend != backend {
			continue
		}
		switch c.Result {
		case CasePass:
			pass++
		case CaseFail:
			fail++
		case CaseSkip:
			skip++
		}
	}
	return pass, fail, skip
}

// Load reads results from a file, or from DIR/results.json when pathOrDir is a directory.
// It refuses files of another schema version and fills in missing summaries.
func Load(pathOrDir string) (*Results, error) {
	path := pathOrDir
	if fi, err := os.Stat(pathOrDir); err == nil && fi.IsDir() {
		path = filepath.Join(pathOrDir, ResultsFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("load results %s: %w", path, err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("load results %s: schema %q, this kpbench reads %q", path, r.SchemaVersion, SchemaVersion)
	}
	for i := range r.Runs {
		for j := range r.Runs[i].Measurements {
			m := &r.Runs[i].Measurements[j]
			if m.Summary.N != len(m.Samples) {
				m.Summary = Summarize(m.Samples)
			}
		}
	}
	return &r, nil
}

// Write writes r as dir/results.json (indented), creating dir if needed. It sets
// SchemaVersion when empty and refuses another.
func (r *Results) Write(dir string) error {
	if r.SchemaVersion == "" {
		r.SchemaVersion = SchemaVersion
	}
	if r.SchemaVersion != SchemaVersion {
		return fmt.Errorf("write results: schema %q, this kpbench writes %q", r.SchemaVersion, SchemaVersion)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return writeFile(filepath.Join(dir, ResultsFile), data)
}

// Add appends a measurement to the run of backend (creating the run), computing its
// Summary from samples. It is the convenient way for measurements to fill Results.
func (r *Results) Add(backend string, m Measurement) {
	m.Summary = Summarize(m.Samples)
	for i := range r.Runs {
		if r.Runs[i].Backend == backend {
			r.Runs[i].Measurements = append(r.Runs[i].Measurements, m)
			return
		}
	}
	r.Runs = append(r.Runs, Run{Backend: backend, Measurements: []Measurement{m}})
}

// Mark is a position in a Results' measurements (the count of each run, in run order),
// taken with Mark and used by StampStep to find what was added since.
type Mark []int

// Mark returns the number of measurements of every run so far.
func (r *Results) Mark() Mark {
	mk := make(Mark, len(r.Runs))
	for i, run := range r.Runs {
		mk[i] = len(run.Measurements)
	}
	return mk
}

// StampStep records step and its window [start, end] on every measurement added since
// mk that has no step yet: the runner calls it after each step, so that a sample far
// from the rest can be traced to the step and time that took it.
func (r *Results) StampStep(mk Mark, step string, start, end time.Time) {
	for i := range r.Runs {
		ms := r.Runs[i].Measurements
		from := 0
		if i < len(mk) {
			from = min(mk[i], len(ms))
		}
		for j := from; j < len(ms); j++ {
			if ms[j].Step == "" {
				ms[j].Step, ms[j].Start, ms[j].End = step, start, end
			}
		}
	}
}

// Label sets a label of the run of backend (creating the run): a fact about how the
// backend ran that holds for all its measurements, such as a non-default option.
func (r *Results) Label(backend, key, value string) {
	for i := range r.Runs {
		if r.Runs[i].Backend == backend {
			if r.Runs[i].Labels == nil {
				r.Runs[i].Labels = map[string]string{}
			}
			r.Runs[i].Labels[key] = value
			return
		}
	}
	r.Runs = append(r.Runs, Run{Backend: backend, Labels: map[string]string{key: value}})
}

// RunLabels returns "backend: k=v, k=v" for every run that has labels, in run order.
func (r *Results) RunLabels() []string {
	var out []string
	for _, run := range r.Runs {
		if len(run.Labels) > 0 {
			out = append(out, run.Backend+": "+paramString(run.Labels, ", "))
		}
	}
	return out
}

// writeFile writes data to path so that a reader never sees half a file.
func writeFile(path string, data []byte) error { return fsutil.WriteFileAtomic(path, data, 0o644) }
