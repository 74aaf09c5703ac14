package reports

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// WriteBench writes r in the Go benchmark format (golang.org/design/14313-benchmark-format),
// one line per raw sample, so that benchstat can summarise and compare runs:
//
//	benchstat -col /backend -row /services bench.txt
//
// Names carry the backend and the parameters as key=value parts, e.g.
// "BenchmarkSync/backend=iptables/services=20000/kind=full 1 5.9e+09 ns/op". Seconds are
// written as ns/op (benchstat shows sec/op), bytes as B, rates as ops/s (declared
// better=higher), counts as "rules" for the rules measurement and "hits" per endpoint
// (endpoint=i) for distributions. The environment is written as configuration lines
// (goos, goarch, kernel, iptables, nft, cores, ...), which benchstat can also group by.
func WriteBench(w io.Writer, r *Results) error {
	bw := benchfmt.NewWriter(w)
	cfg := benchConfig(r)
	if err := bw.Write(&benchfmt.UnitMetadata{
		UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "ops/s", Key: "better"}, OrigUnit: "ops/s", Value: "higher",
	}); err != nil {
		return fmt.Errorf("write bench: %w", err)
	}
	ms := Measures()
	for _, p := range points(r) {
		decl, _ := measureNamed(ms, p.m.Name)
		name := benchName(decl, p.backend, p.m)
		for i, v := range p.m.Samples {
			n := name
			if decl.SampleParam != "" {
				n += "/" + decl.SampleParam + "=" + strconv.Itoa(i)
			}
			val, unit := benchValue(decl, p.m, v)
			res := &benchfmt.Result{Config: cfg, Name: benchfmt.Name(n), Iters: 1, Values: []benchfmt.Value{{Value: val, Unit: unit}}}
			if err := bw.Write(res); err != nil {
				return fmt.Errorf("write bench: %w", err)
			}
		}
	}
	return nil
}

// benchConfig turns the environment into file configuration lines.
func benchConfig(r *Results) []benchfmt.Config {
	e := r.Environment
	var cfg []benchfmt.Config
	add := func(k, v string) {
		if v = strings.TrimSpace(strings.ReplaceAll(v, "\n", " ")); v != "" {
			cfg = append(cfg, benchfmt.Config{Key: k, Value: []byte(v), File: true})
		}
	}
	add("goos", runtime.GOOS)
	add("goarch", runtime.GOARCH)
	add("pkg", "kpbench.dev/kpbench")
	add("scenario", r.Scenario)
	add("kernel", strings.TrimSpace(e.Kernel+" "+e.KernelRelease))
	add("iptables", e.IPTablesVersion)
	add("nft", e.NFTVersion)
	add("tools", e.Tools)
	if e.Cores > 0 {
		add("cores", strconv.Itoa(e.Cores))
	}
	if e.MemoryBytes > 0 {
		add("memory", strconv.FormatInt(e.MemoryBytes, 10))
	}
	add("accelerator", e.Accelerator)
	add("commit", e.KpbenchCommit)
	add("go", e.GoVersion)
	return cfg
}

// benchName is the benchmark name without the "Benchmark" prefix:
// Sync/backend=iptables/services=20000/kind=full. decl is m's measure (zero for a name
// kpbench does not know).
func benchName(decl Measure, backend string, m *Measurement) string {
	name := cmpOr(decl.BenchName, camel(m.Name)) + "/backend=" + backend
	if ps := paramString(sanitizeParams(m.Params), "/"); ps != "" {
		name += "/" + ps
	}
	return name
}

// sanitizeParams makes parameter values safe inside a benchmark name (no spaces, no '/').
func sanitizeParams(params map[string]string) map[string]string {
	out := make(map[string]string, len(params))
	r := strings.NewReplacer(" ", "_", "/", "_", "\t", "_")
	for k, v := range params {
		out[r.Replace(k)] = r.Replace(v)
	}
	return out
}

// camel turns "programming-latency" into "ProgrammingLatency".
func camel(name string) string {
	var b strings.Builder
	for part := range strings.FieldsFuncSeq(name, func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// benchValue converts a sample to the unit written in bench.txt; decl is m's measure.
func benchValue(decl Measure, m *Measurement, v float64) (float64, string) {
	switch m.Unit {
	case UnitSeconds:
		return v * 1e9, "ns/op"
	case UnitBytes:
		return v, "B"
	case UnitPerSecond:
		return v, "ops/s"
	case UnitCount:
		return v, cmpOr(decl.BenchUnit, "count")
	}
	return v, strings.ReplaceAll(m.Unit, " ", "_")
}
