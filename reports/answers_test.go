package reports

import (
	"bytes"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// meas builds a measurement with the given samples.
func meas(name string, params map[string]string, unit string, samples ...float64) Measurement {
	return Measurement{Name: name, Params: params, Unit: unit, Samples: samples, Summary: Summarize(samples)}
}

func full(n string) map[string]string    { return map[string]string{"services": n, "kind": "full"} }
func partial(n string) map[string]string { return map[string]string{"services": n, "kind": "partial"} }
func at(n, pos string) map[string]string { return map[string]string{"services": n, "position": pos} }
func size(n string) map[string]string    { return map[string]string{"services": n} }

// cell finds the answer for question title at size in t.
func cell(t *testing.T, at answersTable, title, size string) answer {
	t.Helper()
	si := -1
	for i, s := range at.Sizes {
		if s == size {
			si = i
		}
	}
	require.GreaterOrEqual(t, si, 0, "size %s in %v", size, at.Sizes)
	for _, row := range at.Rows {
		if row.Question.Title == title {
			return row.Cells[si]
		}
	}
	t.Fatalf("no row %q", title)
	return answer{}
}

func TestAnswers(t *testing.T) {
	r := &Results{}
	r.Add("iptables", meas(MeasureSync, full("1000"), UnitSeconds, 0.4, 0.5, 0.6))
	r.Add("nftables", meas(MeasureSync, full("1000"), UnitSeconds, 0.2, 0.25, 0.3))
	r.Add("userspace", meas(MeasureSync, full("1000"), UnitSeconds, 0.1, 0.1, 0.1))
	r.Add("iptables", meas(MeasureSync, full("10000"), UnitSeconds, 70, 80))
	r.Add("nftables", meas(MeasureSync, full("10000"), UnitSeconds, 30, 40))
	// Lookups: the three positions are pooled, the established control is not.
	r.Add("iptables", meas(MeasureLookup, at("10000", "first"), UnitSeconds, 100e-6, 100e-6, 100e-6))
	r.Add("iptables", meas(MeasureLookup, at("10000", "last"), UnitSeconds, 300e-6, 300e-6, 300e-6))
	r.Add("iptables", meas(MeasureLookup, at("10000", "established"), UnitSeconds, 1e-6, 1e-6, 1e-6))
	r.Add("nftables", meas(MeasureLookup, at("10000", "first"), UnitSeconds, 150e-6, 150e-6, 150e-6))
	r.Add("nftables", meas(MeasureLookup, at("10000", "last"), UnitSeconds, 150e-6, 150e-6, 150e-6))
	// Throughput: higher is better.
	r.Add("iptables", meas(MeasureThroughputConnections, size("10000"), UnitPerSecond, 3000, 3000, 3000))
	r.Add("nftables", meas(MeasureThroughputConnections, size("10000"), UnitPerSecond, 6000, 6000, 6000))
	// Kernel memory in bytes: the question makes it lower-is-better in an old file.
	r.Add("iptables", meas(MeasureRulesMemory, size("10000"), UnitBytes, 70<<20))
	r.Add("nftables", meas(MeasureRulesMemory, size("10000"), UnitBytes, 17<<20))
	// A measurement without samples is not measured.
	r.Add("userspace", meas(MeasureSync, full("10000"), UnitSeconds))

	at := answers(r)
	assert.Equal(t, []string{"1000", "10000"}, at.Sizes)

	tests := []struct {
		name, question, size string
		best                 string
		ratio                float64 // 0: no ratio
		n                    int     // backends ranked
	}{
		{"lower is better", "full sync", "1000", "userspace", 2.5, 3},
		{"sample-less figure is not measured", "full sync", "10000", "nftables", 2.14, 2},
		{"first-packet pools positions, not the control", "first-packet latency p50", "10000", "nftables", 200.0 / 150, 2},
		{"higher is better", "new connections per second", "10000", "nftables", 2, 2},
		{"kernel memory: smaller is better", "kernel memory of the rules", "10000", "nftables", 70.0 / 17, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := cell(t, at, tt.question, tt.size)
			require.NotNil(t, a.Best())
			assert.Equal(t, tt.best, a.Best().Backend)
			assert.Len(t, a.Standings, tt.n)
			ratio, ok := a.Ratio()
			require.True(t, ok)
			assert.InDelta(t, tt.ratio, ratio, 0.01)
		})
	}

	t.Run("questions nobody measured have no row", func(t *testing.T) {
		for _, row := range at.Rows {
			assert.NotEqual(t, "partial sync (one Service changed)", row.Question.Title)
			assert.NotContains(t, row.Question.Title, "programming latency")
		}
	})
	t.Run("a backend that measured other sizes but not this one is named", func(t *testing.T) {
		a := cell(t, at, "full sync", "10000")
		assert.Equal(t, []string{"userspace"}, a.Missing)
		assert.Equal(t, "not measured: userspace", answerCell(a).Missing)
	})
	t.Run("a size without the figure is —", func(t *testing.T) {
		a := cell(t, at, "new connections per second", "1000")
		assert.Nil(t, a.Best())
		assert.Equal(t, htmlAnswerCell{}, answerCell(a))
		var page bytes.Buffer
		require.NoError(t, WriteHTML(&page, r))
		assert.Contains(t, page.String(), "<td>—</td>")
	})
}

// TestAnswersDeclaredDirection: a declaration in the results wins over the unit's rule.
func TestAnswersDeclaredDirection(t *testing.T) {
	r := &Results{Metrics: []Metric{{Measurement: MeasureRulesMemory, Unit: UnitBytes, Better: HigherIsBetter}}}
	r.Add("a", meas(MeasureRulesMemory, size("1000"), UnitBytes, 10))
	r.Add("b", meas(MeasureRulesMemory, size("1000"), UnitBytes, 20))
	a := cell(t, answers(r), "kernel memory of the rules", "1000")
	assert.Equal(t, "b", a.Best().Backend, "declared higher-is-better")

	r.Metrics[0].Better = NoDirection
	a = cell(t, answers(r), "kernel memory of the rules", "1000")
	_, ok := a.Ratio()
	assert.False(t, ok, "no direction, no ratio")
	assert.Equal(t, NoDirection, betterOf(r, &r.Runs[0].Measurements[0]))
}

// TestAnswersNoRatioAgainstZero: a zero figure (unmeasured CPU recorded as 0 by older
// runs) never makes a backend "best by infinity".
func TestAnswersNoRatioAgainstZero(t *testing.T) {
	r := &Results{}
	r.Add("a", meas(MeasureSync, full("1000"), UnitSeconds, 0, 0, 0))
	r.Add("b", meas(MeasureSync, full("1000"), UnitSeconds, 1, 1, 1))
	a := cell(t, answers(r), "full sync", "1000")
	_, ok := a.Ratio()
	assert.False(t, ok)
	rows := comparisonRows(r)
	require.Len(t, rows, 1)
	assert.Empty(t, rows[0].ratioText(), "no best against a zero")
}

func TestAnswersNearTie(t *testing.T) {
	r := &Results{}
	r.Add("a", meas(MeasureSync, full("1000"), UnitSeconds, 1.00, 1.00, 1.00))
	r.Add("b", meas(MeasureSync, full("1000"), UnitSeconds, 1.03, 1.03, 1.03))
	assert.Equal(t, "within 5% of b (1.03 s)", answerCell(cell(t, answers(r), "full sync", "1000")).Vs, "no winner by noise")
}

func TestAnswersOneBackend(t *testing.T) {
	r := &Results{Scenario: "solo"}
	r.Add("nftables", meas(MeasureSync, full("1000"), UnitSeconds, 0.2, 0.3))
	a := cell(t, answers(r), "full sync", "1000")
	require.NotNil(t, a.Best())
	_, ok := a.Ratio()
	assert.False(t, ok)
	assert.Equal(t, "the only backend measured", answerCell(a).Vs)
	var sum bytes.Buffer
	require.NoError(t, Summary(&sum, r))
	assert.Regexp(t, `full sync +nftables +250 ms +the only backend measured`, sum.String())
}

func TestOutliers(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 14, 1, 30, 0, time.UTC)
	r := &Results{}
	m := meas(MeasureSync, partial("5000"), UnitSeconds, 0.43, 210.7, 0.5, 0.58, 0.54)
	m.Step, m.Start, m.End = "partial-sync-5k", t0, t0.Add(4*time.Minute)
	r.Add("iptables", m)
	dated := meas(MeasureSync, partial("1000"), UnitSeconds, 0.1, 0.1, 5, 0.1)
	dated.Step, dated.Start, dated.Offsets = "partial-sync-1k", t0, []float64{1, 2, 7, 8}
	r.Add("iptables", dated)
	rate := meas(MeasureThroughputConnections, size("1000"), UnitPerSecond, 4000, 4100, 100, 4050)
	r.Add("nftables", rate)
	r.Add("nftables", meas(MeasureSync, full("1000"), UnitSeconds, 1, 9)) // 2 samples: none stands out
	r.Add("nftables", meas(MeasureDistribution, size("1000"), UnitCount, 1, 100, 100))

	outs := Outliers(r)
	require.Len(t, outs, 3)
	assert.Equal(t, 1, outs[0].Index)
	assert.InDelta(t, 210.7, outs[0].Value, 1e-9)
	assert.Equal(t, "iptables sync services=5000 kind=partial: sample 2 of 5 = 211 s, 390x the median 540 ms, step partial-sync-5k between 2026-12-02 14:01:30 and 14:05:30 UTC", outs[0].String())
	assert.Contains(t, outs[1].String(), "step partial-sync-1k at 2026-12-02 14:01:37 UTC", "dated by its offset")
	assert.Contains(t, outs[2].String(), "nftables throughput-connections services=1000: sample 3 of 4 = 100/s, 40x the median 4.03 k/s", "a rate's bad tail is low")

	// A lookup whose tail stands out more, but costs far less time than the sync's.
	r.Add("nftables", meas(MeasureLookup, at("1000", "first"), UnitSeconds, 1e-4, 1e-4, 1e-4, 0.1, 0.09, 1e-4))
	gs := groupOutliers(Outliers(r))
	require.Len(t, gs, 4)
	assert.Equal(t, MeasureSync, gs[0].first.Name, "the 210 s sync first: it cost the most time")
	assert.Equal(t, MeasureLookup, gs[2].first.Name)
	assert.Equal(t, 2, gs[2].count)
	assert.Contains(t, gs[2].String(), "(worst of 2 such samples out of 6)")
	assert.Equal(t, MeasureThroughputConnections, gs[3].first.Name, "rates after durations")

	var sum bytes.Buffer
	require.NoError(t, Summary(&sum, r))
	assert.Contains(t, sum.String(), "SAMPLES FAR FROM THE REST")
	assert.Contains(t, sum.String(), "540 ms | 202 s | 211 s", "median, p99 and max side by side")
	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, r))
	assert.Contains(t, page.String(), "Samples far from the rest")
	assert.Contains(t, page.String(), "p99 202 s, max 211 s, n=5")
}

// twoEnvironments is a native run and an emulated ladder with ipvs.
func twoEnvironments(t *testing.T) (string, string) {
	t.Helper()
	native := &Results{Scenario: "bench", Environment: Environment{Kernel: "Linux", KernelRelease: "6.18.44", Accelerator: "native", Cores: 2}}
	native.Add("iptables", meas(MeasureSync, full("1000"), UnitSeconds, 0.4, 0.4, 0.4))
	native.Add("nftables", meas(MeasureSync, full("1000"), UnitSeconds, 0.2, 0.2, 0.2))
	vm := &Results{Scenario: "vm-ladder", Environment: Environment{Kernel: "Linux", KernelRelease: "6.1.0-57-amd64", Accelerator: "tcg", Cores: 2}}
	vm.Add("iptables", meas(MeasureSync, full("1000"), UnitSeconds, 5, 5, 5))
	vm.Add("ipvs", meas(MeasureSync, full("1000"), UnitSeconds, 2, 2, 2))
	dir := t.TempDir()
	a, b := filepath.Join(dir, "native"), filepath.Join(dir, "vm")
	require.NoError(t, native.Write(a))
	require.NoError(t, vm.Write(b))
	return a, b
}

func TestWriteMergedSections(t *testing.T) {
	a, b := twoEnvironments(t)
	srcs, err := LoadSources(a, b)
	require.NoError(t, err)
	out := t.TempDir()
	files, err := WriteMerged(out, srcs)
	require.NoError(t, err)
	assert.Contains(t, files, filepath.Join(out, HTMLFile))
	assert.Contains(t, files, filepath.Join(out, "plots", "native-6.18.44-bench-sync-full.png"))
	assert.Contains(t, files, filepath.Join(out, "plots", "tcg-6.1.0-57-amd64-vm-ladder-sync-full.svg"))
	data, err := os.ReadFile(filepath.Join(out, HTMLFile))
	require.NoError(t, err)
	page := html.UnescapeString(string(data))
	for _, want := range []string{
		"kpbench report: bench, vm-ladder", "bench: native, Linux 6.18.44, 2 cores", "vm-ladder: emulated (TCG), Linux 6.1.0-57-amd64, 2 cores",
		"2.0x faster than iptables (400 ms)", // native: nftables against iptables
		"2.5x faster than iptables (5 s)",    // emulated: ipvs against iptables, not against native figures
		"IPVS is deprecated", "KubeProxyIPVS", "off by default in 1.40", "removed in 1.43",
		"Emulated kernel: compare backends within this section only",
	} {
		assert.True(t, strings.Contains(page, want), "merged report lacks %q", want)
	}
	assert.NotContains(t, page, "12x faster", "no ratio across environments (5 s / 400 ms)")
	assert.NotContains(t, page, "Kernel against kernel", "two scenarios are not a kernel matrix")
}

func TestKernelMatrix(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []struct {
		release string
		v       float64
	}{{"6.1.0-57-amd64", 4}, {"6.12.118+deb12-amd64", 2}} {
		r := &Results{Scenario: "vm-ladder", Environment: Environment{Kernel: "Linux", KernelRelease: k.release, Accelerator: "tcg"}}
		r.Add("ipvs", meas(MeasureSync, full("1000"), UnitSeconds, k.v, k.v, k.v))
		r.Add("nftables", meas(MeasureSync, full("1000"), UnitSeconds, 2*k.v, 2*k.v))
		require.NoError(t, r.Write(filepath.Join(dir, k.release)))
	}
	srcs, err := LoadSources(dir)
	require.NoError(t, err, "a matrix OUT/ holds one results dir per kernel")
	require.Len(t, srcs, 2)
	kcs := kernelComparisons(srcs)
	require.Len(t, kcs, 1)
	assert.Equal(t, "emulated (TCG)", kcs[0].Label)
	assert.Equal(t, []string{"6.1.0-57-amd64", "6.12.118+deb12-amd64"}, kcs[0].Kernels)
	var ipvs *kernelRow
	for i := range kcs[0].Rows {
		if kcs[0].Rows[i].Backend == "ipvs" && kcs[0].Rows[i].Question == "full sync" {
			ipvs = &kcs[0].Rows[i]
		}
	}
	require.NotNil(t, ipvs)
	assert.Equal(t, 1, ipvs.Best)
	assert.InDelta(t, 2, ipvs.Ratio, 1e-9)

	out := t.TempDir()
	_, err = WriteMerged(out, srcs)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(out, HTMLFile))
	require.NoError(t, err)
	page := html.UnescapeString(string(data))
	assert.True(t, strings.Contains(page, "Kernel against kernel"))
	assert.True(t, strings.Contains(page, "vm-ladder, emulated (TCG)"))
	assert.True(t, strings.Contains(page, "6.12.118+deb12-amd64, 2.0x faster than the worst"))
}

func TestLoadSourcesRefuses(t *testing.T) {
	empty := t.TempDir()
	_, err := LoadSources(empty)
	assert.ErrorContains(t, err, "no results.json in it or in its subdirectories")
	_, err = LoadSources(filepath.Join(empty, "nope"))
	assert.ErrorContains(t, err, "no such file")
	_, err = LoadSources()
	assert.Error(t, err)
}

func TestSummaryNotesIPVSDeprecation(t *testing.T) {
	r := &Results{}
	r.Add("nftables", meas(MeasureSync, full("1000"), UnitSeconds, 1))
	var without bytes.Buffer
	require.NoError(t, Summary(&without, r))
	assert.NotContains(t, without.String(), "KEP-5495")
	r.Add("kube-proxy-ipvs", meas(MeasureSync, full("1000"), UnitSeconds, 1))
	var with bytes.Buffer
	require.NoError(t, Summary(&with, r))
	assert.Contains(t, with.String(), "KEP-5495")
}

// TestConformanceReport: a run of cases only (kpbench conform) shows its matrix, and no
// empty answers table.
func TestConformanceReport(t *testing.T) {
	r := &Results{Scenario: "conformance", Cases: []Case{{Name: "[sig-network] Services should serve a basic endpoint from pods", Backend: "nftables", Result: CasePass}}}
	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, r))
	assert.True(t, strings.Contains(page.String(), `<h2 id="conformance">Conformance</h2>`))
	assert.False(t, strings.Contains(page.String(), "Which mode at which scale?"))
	assert.False(t, strings.Contains(page.String(), "No measurements in this run."))
	assert.False(t, strings.Contains(page.String(), "Every figure"))
}

// TestOutliersOfAnsweredFigures: the box above the charts shows the tails of
// the answered figures; a throughput load's latencies go to the tables only.
func TestOutliersOfAnsweredFigures(t *testing.T) {
	r := &Results{}
	r.Add("nftables", meas(MeasureThroughputLatency, size("1000"), UnitSeconds, 1e-4, 1e-4, 1e-4, 0.5))
	r.Add("nftables", meas(MeasureSync, partial("1000"), UnitSeconds, 0.1, 0.1, 0.1, 5))
	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, r))
	box := page.String()[strings.Index(page.String(), `<div class="tails">`):strings.Index(page.String(), `id="charts"`)]
	assert.Contains(t, box, "nftables sync services=1000 kind=partial")
	assert.NotContains(t, box, "throughput-latency")
	assert.Contains(t, page.String()[strings.Index(page.String(), "Every sample far from the rest"):], "throughput-latency")
}

// TestAnswersWithinNoise: the answers table names a winner only when its lead is
// significant at the sample counts; otherwise "within noise" with both figures.
func TestAnswersWithinNoise(t *testing.T) {
	run := func(a, b []float64) *Results {
		r := &Results{SchemaVersion: SchemaVersion}
		r.Add("iptables", Measurement{Name: MeasureSync, Params: map[string]string{"services": "5000", "kind": "full"}, Unit: UnitSeconds, Samples: a})
		r.Add("nftables", Measurement{Name: MeasureSync, Params: map[string]string{"services": "5000", "kind": "full"}, Unit: UnitSeconds, Samples: b})
		return r
	}
	tests := []struct {
		name       string
		a, b       []float64
		wantWinner string
		wantValue  string
	}{
		{"one sample a side, 15% apart: within noise", []float64{2.3}, []float64{2.0}, "within noise", "nftables 2 s, iptables 2.3 s"},
		{"ten tight samples a side, 2x apart: a winner", around(1, 10, 4, 0.02), around(2, 10, 2, 0.02), "nftables", ""},
		{"ten noisy samples a side, 5% apart: within noise", around(3, 10, 2.1, 0.5), around(4, 10, 2, 0.5), "within noise", "iptables"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := answers(run(tt.a, tt.b))
			require.NotEmpty(t, at.Rows)
			c := answerCell(at.Rows[0].Cells[0])
			assert.Equal(t, tt.wantWinner, c.Winner)
			assert.Contains(t, c.Value, tt.wantValue)
			var out bytes.Buffer
			require.NoError(t, Summary(&out, run(tt.a, tt.b)))
			assert.Contains(t, out.String(), tt.wantWinner)
		})
	}
}
