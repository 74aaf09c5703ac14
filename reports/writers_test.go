package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"
)

func TestResultsRoundTrip(t *testing.T) {
	want := sampleResults()
	dir := t.TempDir()
	require.NoError(t, want.Write(dir))
	for _, from := range []string{dir, filepath.Join(dir, ResultsFile)} {
		got, err := Load(from)
		require.NoError(t, err, from)
		assert.Equal(t, want, got, from)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	tests := []struct {
		name, path, wantErr string
	}{
		{"missing", filepath.Join(dir, "nope.json"), "no such file"},
		{"not json", write("bad.json", "{"), "unexpected end"},
		{"other schema", write("v0.json", `{"schemaVersion": "kpbench.dev/results/v0"}`), `schema "kpbench.dev/results/v0"`},
		{"no schema", write("none.json", `{}`), `schema ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestLoadFillsMissingSummaries(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"schemaVersion":"kpbench.dev/results/v1","runs":[{"backend":"nftables",
		"measurements":[{"name":"sync","unit":"s","samples":[1,2,3]}]}]}`), 0o644))
	r, err := Load(p)
	require.NoError(t, err)
	s := r.Runs[0].Measurements[0].Summary
	assert.Equal(t, 3, s.N)
	assert.InDelta(t, 2.0, s.P50, 1e-12)
}

func TestWriteBenchParsesBack(t *testing.T) {
	r := sampleResults()
	var buf bytes.Buffer
	require.NoError(t, WriteBench(&buf, r))

	total := 0
	for _, p := range points(r) {
		total += len(p.m.Samples)
	}
	rd := benchfmt.NewReader(&buf, "bench.txt")
	n, found := 0, false
	units := map[string]bool{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Fatalf("bench.txt does not parse: %v", rec)
		case *benchfmt.Result:
			n++
			require.Len(t, rec.Values, 1)
			units[rec.Values[0].Unit] = true
			assert.Equal(t, "linux", string(rec.GetConfig("goos")))
			assert.Equal(t, "Linux 6.18.0-kpbench", string(rec.GetConfig("kernel")))
			assert.Equal(t, "2", string(rec.GetConfig("cores")))
			base, parts := rec.Name.Parts()
			if string(rec.Name) == "Sync/backend=nftables/services=20000/kind=full" && !found {
				found = true
				assert.Equal(t, []byte("Sync"), base)
				assert.Equal(t, [][]byte{[]byte("/backend=nftables"), []byte("/services=20000"), []byte("/kind=full")}, parts)
				var first float64
				for _, m := range r.Runs[2].Measurements {
					if m.Name == MeasureSync && m.Params["services"] == "20000" && m.Params["kind"] == "full" {
						first = m.Samples[0]
						break
					}
				}
				require.NotZero(t, first)
				v := rec.Values[0]
				assert.Equal(t, "ns/op", v.OrigUnit)
				assert.InDelta(t, first*1e9, v.OrigValue, 1e-3)
				assert.Equal(t, "sec/op", v.Unit, "ns/op is normalised to sec/op by the reader")
				assert.InDelta(t, first, v.Value, 1e-12)
			}
		}
	}
	require.NoError(t, rd.Err())
	assert.Equal(t, total, n, "one line per sample")
	assert.True(t, found, "the full sync of 20k Services on nftables is in bench.txt")
	assert.Subset(t, keys(units), []string{"sec/op", "rules", "hits", "ops/s"})
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestBenchName(t *testing.T) {
	tests := []struct {
		name string
		m    Measurement
		want string
	}{
		{"sync", Measurement{Name: "sync", Params: map[string]string{"kind": "full", "services": "20000"}}, "Sync/backend=b/services=20000/kind=full"},
		{"dashed name, extra param sorted last", Measurement{Name: "programming-latency", Params: map[string]string{"zone": "a b", "services": "1"}}, "ProgrammingLatency/backend=b/services=1/zone=a_b"},
		{"perrule", Measurement{Name: "perrule"}, "PerRule/backend=b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			decl, _ := measureNamed(Measures(), tt.m.Name)
			assert.Equal(t, tt.want, benchName(decl, "b", &tt.m))
		})
	}
}

func TestWriteCSV(t *testing.T) {
	r := sampleResults()
	dir := t.TempDir()
	files, err := WriteCSV(dir, r)
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	assert.ElementsMatch(t, []string{"sync.csv", "lookup.csv", "rules.csv", "throughput.csv", "programming-latency.csv", "distribution.csv", "perrule.csv"}, names)

	tests := []struct {
		file   string
		header []string
		rows   int
	}{
		{"sync.csv", []string{"backend", "services", "kind", "unit", "sample", "value"}, 3 * 4 * 2 * 5},
		{"lookup.csv", []string{"backend", "services", "position", "unit", "sample", "value"}, 3 * 4 * 4 * 50},
		{"distribution.csv", []string{"backend", "services", "endpoints", "expected", "unit", "sample", "value"}, 3 * 10},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join(dir, tt.file))
			require.NoError(t, err)
			defer f.Close()
			recs, err := csv.NewReader(f).ReadAll()
			require.NoError(t, err)
			assert.Equal(t, tt.header, recs[0])
			assert.Len(t, recs[1:], tt.rows)
			assert.Equal(t, "iptables", recs[1][0])
		})
	}
}

func TestWriteJUnit(t *testing.T) {
	r := sampleResults()
	var buf bytes.Buffer
	require.NoError(t, WriteJUnit(&buf, r))
	var got junitSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &got), "junit.xml must be well-formed")
	assert.Equal(t, 18, got.Tests)
	assert.Equal(t, 1, got.Failures)
	assert.Equal(t, 1, got.Skipped)
	require.Len(t, got.Suites, 3)
	legacy := got.Suites[1]
	assert.Equal(t, "iptables-legacy", legacy.Name)
	var failure *junitMessage
	for _, c := range legacy.Cases {
		if c.Failure != nil {
			failure = c.Failure
			assert.Contains(t, c.Name, "session affinity")
		}
	}
	require.NotNil(t, failure)
	assert.Contains(t, failure.Message, "reached a second endpoint")
	assert.Contains(t, failure.Body, "pod-b x2")
	assert.NotNil(t, got.Suites[2].Cases[5].Skipped)

	t.Run("unknown result refused", func(t *testing.T) {
		bad := &Results{Cases: []Case{{Name: "x", Backend: "b", Result: "maybe"}}}
		assert.ErrorContains(t, WriteJUnit(&bytes.Buffer{}, bad), `unknown result "maybe"`)
	})
	t.Run("no cases: empty but valid", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, WriteJUnit(&b, &Results{}))
		var s junitSuites
		require.NoError(t, xml.Unmarshal(b.Bytes(), &s))
		assert.Zero(t, s.Tests)
	})
}

func TestWritePlots(t *testing.T) {
	tests := []struct {
		name string
		r    *Results
		want []string
	}{
		{"sample", sampleResults(), []string{
			"first-packet", "sync-full", "sync-partial", "lookup-positions", "programming-latency",
			"throughput", "rules", "distribution", "perrule",
		}},
		{"only sync", onlySync(sampleResults()), []string{"sync-full", "sync-partial"}},
		{"nothing", &Results{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := WritePlots(dir, tt.r)
			require.NoError(t, err)
			var want []string
			for _, n := range tt.want {
				want = append(want, filepath.Join(dir, "plots", n+".png"), filepath.Join(dir, "plots", n+".svg"))
			}
			assert.ElementsMatch(t, want, files)
			for _, f := range files {
				data, err := os.ReadFile(f)
				require.NoError(t, err)
				require.NotEmpty(t, data, f)
				if strings.HasSuffix(f, ".png") {
					img, err := png.Decode(bytes.NewReader(data))
					require.NoError(t, err, f)
					assert.Greater(t, img.Bounds().Dx(), 300, f)
				} else {
					assert.Contains(t, string(data), "<svg", f)
				}
			}
		})
	}
}

// onlySync keeps the sync measurements of r, and no cases.
func onlySync(r *Results) *Results {
	for i := range r.Runs {
		var ms []Measurement
		for _, m := range r.Runs[i].Measurements {
			if m.Name == MeasureSync {
				ms = append(ms, m)
			}
		}
		r.Runs[i].Measurements = ms
	}
	r.Cases = nil
	return r
}

func TestWriteHTML(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteHTML(&buf, sampleResults()))
	page := buf.String()
	for _, want := range []string{
		"<h1>kpbench report: perf-ladder</h1>", `<h2 id="answers">Which mode at which scale?</h2>`,
		`<h2 id="charts">Charts</h2>`, `<h2 id="conformance">Conformance</h2>`, `<h2 id="tables">Tables</h2>`,
		`<h3 id="environment">Environment</h3>`, "iptables v1.8.9 (nf_tables)", "services=20000 kind=full",
		"6.22 s", "1.18 s", "nftables best, 5.3x faster than iptables", "p99 = max 6.27 s, n=5",
		`<th>10,000 Services</th>`, `<span class="win">nftables</span> <span class="val">584 ms</span>`,
		"2.4x faster than iptables-legacy (1.41 s)",
		`<td class="fail" title="2 of 50 connections`, `<td class="skip"`, "16 passed, 1 failed, 1 skipped",
		"Published first-packet latencies beside this run", "(2025-02-28), chart of KEP-3866",
	} {
		assert.True(t, strings.Contains(page, want), "report.html lacks %q", want) // the page is too long to print
	}
	assert.Less(t, strings.Index(page, "Which mode at which scale?"), strings.Index(page, `id="charts"`), "answers first")
	assert.Less(t, strings.Index(page, `id="charts"`), strings.Index(page, "Every figure: median"), "long tables last")
	assert.Equal(t, 9, strings.Count(page, "<svg"), "every chart inlined")
	assert.NotContains(t, page, "<?xml", "SVG prologs stripped when inlined")
	assert.NotContains(t, page, "KEP-5495", "no IPVS, no deprecation note")
	for _, external := range []string{"<script", "<link", " src=", "url(http"} {
		assert.NotContains(t, page, external, "self-contained")
	}
	t.Run("informational figure marked", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, WriteHTML(&b, onceDeclared(55.1, "once within the budget")))
		assert.Contains(t, b.String(), "services=20000 kind=full (informational, never gated: once within the budget)")
		b.Reset()
		require.NoError(t, WriteHTML(&b, onceDeclared(55.1, "")))
		assert.NotContains(t, b.String(), "informational, never gated")
	})
	t.Run("empty run", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, WriteHTML(&b, &Results{Scenario: "x"}))
		assert.Contains(t, b.String(), "No measurements in this run.")
		assert.NotContains(t, b.String(), "Conformance", "no cases, no matrix")
	})
}

func TestSummary(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Summary(&buf, sampleResults()))
	out := buf.String()
	for _, want := range []string{
		"perf-ladder (VM (KVM), Linux 6.18.0-kpbench, 2 cores)", "AT 10,000 SERVICES", "IPTABLES", "NFTABLES",
		"nftables best, 5.3x faster than iptables", "6.22 s | 6.27 s | 6.27 s",
		"2.4x faster than iptables-legacy (1.41 s)", "p = ", "iptables-legacy  5     1     0",
	} {
		assert.Contains(t, out, want)
	}
}

func TestWriteAll(t *testing.T) {
	dir := t.TempDir()
	r := sampleResults()
	files, err := WriteAll(dir, r)
	require.NoError(t, err)
	for _, name := range []string{ResultsFile, BenchFile, JUnitFile, HTMLFile, "sync.csv", "plots/sync-full.svg"} {
		assert.Contains(t, files, filepath.Join(dir, name))
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.NotZero(t, fi.Size(), name)
	}
	got, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, r, got)
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{
		{5.9, UnitSeconds, "5.9 s"},
		{0.0118, UnitSeconds, "11.8 ms"},
		{4.75e-5, UnitSeconds, "47.5 µs"},
		{3e-8, UnitSeconds, "30 ns"},
		{0, UnitSeconds, "0 s"},
		{1485.16, UnitSeconds, "1485 s"},
		{182012, UnitCount, "182 k"},
		{512, UnitPerSecond, "512/s"},
		{13900, UnitPerSecond, "13.9 k/s"},
		{4 << 30, UnitBytes, "4 GiB"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, formatValue(tt.v, tt.unit), "%g %s", tt.v, tt.unit)
	}
}

func TestAdd(t *testing.T) {
	r := &Results{}
	r.Add("nftables", Measurement{Name: MeasureSync, Unit: UnitSeconds, Samples: []float64{1, 3}})
	r.Add("nftables", Measurement{Name: MeasureRules, Unit: UnitCount, Samples: []float64{7}})
	r.Add("iptables", Measurement{Name: MeasureSync, Unit: UnitSeconds, Samples: []float64{2}})
	require.Len(t, r.Runs, 2)
	assert.Len(t, r.Runs[0].Measurements, 2)
	assert.InDelta(t, 2.0, r.Runs[0].Measurements[0].Summary.Mean, 1e-12)
}

func TestRunLabels(t *testing.T) {
	r := &Results{Scenario: "s"}
	r.Label("iptables", "iptables-cache", "whole-table")
	r.Add("iptables", Measurement{Name: MeasureSync, Params: map[string]string{"services": "1000"}, Unit: UnitSeconds, Samples: []float64{1}})
	r.Add("iptables-legacy", Measurement{Name: MeasureSync, Params: map[string]string{"services": "1000"}, Unit: UnitSeconds, Samples: []float64{2}})
	require.Len(t, r.Runs, 2)
	assert.Len(t, r.Runs[0].Measurements, 1, "Label and Add share the run")
	assert.Equal(t, []string{"iptables: iptables-cache=whole-table"}, r.RunLabels())

	var sum bytes.Buffer
	require.NoError(t, Summary(&sum, r))
	assert.Contains(t, sum.String(), "run labels of iptables: iptables-cache=whole-table")
	assert.Equal(t, 1, strings.Count(sum.String(), "services=1000"), "labels do not split a metric's row")
	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, r))
	assert.Contains(t, page.String(), "<th>labels of iptables</th><td>iptables-cache=whole-table</td>")
}
