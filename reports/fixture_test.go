package reports

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/reports/stats"
)

var update = flag.Bool("update", false, "rewrite testdata/sample-results.json from sampleResults")

const fixture = "testdata/sample-results.json"

// sampleResults is a synthetic but realistic run: iptables (nft flavour), iptables-legacy
// and nftables at 1k, 5k, 10k and 20k Services, shaped like the figures measured on the
// 2-core dev VM (full iptables sync of 20k Services ≈ 5.9 s, nftables ≈ 1.2 s; lookups
// linear in the rule position for iptables, flat for nftables). Deterministic: a seeded
// PCG source, samples rounded to 4 significant digits.
func sampleResults() *Results {
	rng := rand.New(rand.NewPCG(6, 2026))
	noise := func(v, rel float64) float64 { return round4(v * math.Exp(rng.NormFloat64()*rel)) }
	samples := func(n int, v, rel float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = noise(v, rel)
		}
		return s
	}
	start := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	r := &Results{
		SchemaVersion: SchemaVersion,
		Scenario:      "perf-ladder",
		Started:       start,
		Finished:      start.Add(47*time.Minute + 12*time.Second),
		Environment: Environment{
			Kernel: "Linux", KernelRelease: "6.18.0-kpbench", IPTablesVersion: "iptables v1.8.9 (nf_tables)",
			NFTVersion: "nftables v1.0.6 (Lester Gooch #5)", Cores: 2, MemoryBytes: 4 << 30,
			KpbenchCommit: "ee3637e", GoVersion: "go1.26.8", Hostname: "kpbench-dev", Accelerator: "kvm",
			Date: start,
		},
	}
	sizes := []float64{1000, 5000, 10000, 20000}
	type model struct {
		name                        string
		full20k, partial20k, exp    float64 // seconds at 20k, growth exponent
		lookupPerRule, lookupBase   float64 // seconds per rule traversed, fixed cost
		rulesPerService, throughput float64
		progP50                     float64
	}
	models := []model{
		{"iptables", 5.9, 1.45, 1.15, 95e-9, 48e-6, 9.1, 0, 3.1},
		{"iptables-legacy", 3.4, 0.95, 1.25, 80e-9, 45e-6, 9.1, 0, 1.9},
		{"nftables", 1.2, 0.012, 1.05, 0, 47e-6, 6.2, 0, 0.035},
	}
	for _, m := range models {
		run := Run{Backend: m.name, Labels: map[string]string{"nodes": "1", "endpoints-per-service": "2"}}
		add := func(meas Measurement) {
			meas.Summary = Summarize(meas.Samples)
			run.Measurements = append(run.Measurements, meas)
		}
		for _, n := range sizes {
			svc := strconv.Itoa(int(n))
			f := math.Pow(n/20000, m.exp)
			add(Measurement{Name: MeasureSync, Params: map[string]string{"services": svc, "kind": "full"}, Unit: UnitSeconds, Samples: samples(5, m.full20k*f, 0.04)})
			add(Measurement{Name: MeasureSync, Params: map[string]string{"services": svc, "kind": "partial"}, Unit: UnitSeconds, Samples: samples(5, m.partial20k*f, 0.06)})
			for _, pos := range []struct {
				name string
				frac float64
			}{{"first", 0}, {"middle", 0.5}, {"last", 1}} {
				cost := m.lookupBase + m.lookupPerRule*n*pos.frac*2 // two rules per Service in KUBE-SERVICES
				add(Measurement{Name: MeasureLookup, Params: map[string]string{"services": svc, "position": pos.name}, Unit: UnitSeconds, Samples: samples(50, cost, 0.12)})
			}
			add(Measurement{Name: MeasureLookup, Params: map[string]string{"services": svc, "position": "established"}, Unit: UnitSeconds, Samples: samples(50, 31e-6, 0.1)})
			add(Measurement{Name: MeasureRules, Params: map[string]string{"services": svc}, Unit: UnitCount, Samples: []float64{math.Round(m.rulesPerService*n + 12)}})
			mid := m.lookupBase + m.lookupPerRule*n
			add(Measurement{Name: MeasureThroughput, Params: map[string]string{"services": svc}, Unit: UnitPerSecond, Samples: samples(5, math.Round(1/(mid+25e-6)), 0.03)})
		}
		lat := make([]float64, 200)
		for i := range lat {
			lat[i] = round4(m.progP50 * math.Exp(rng.NormFloat64()*0.35))
		}
		add(Measurement{Name: MeasureProgrammingLatency, Params: map[string]string{"services": "20000"}, Unit: UnitSeconds, Samples: lat})
		counts := make([]int, 10)
		for range 5000 {
			counts[rng.IntN(10)]++
		}
		chi2, df, p, err := stats.ChiSquareGOF(counts, stats.Uniform(10))
		if err != nil {
			panic(err)
		}
		hits := make([]float64, len(counts))
		for i, c := range counts {
			hits[i] = float64(c)
		}
		add(Measurement{Name: MeasureDistribution, Params: map[string]string{"services": "20000", "endpoints": "10", "expected": "uniform"}, Unit: UnitCount, Samples: hits, Extra: map[string]float64{"chi2": round4(chi2), "df": float64(df), "p_value": round4(p)}})
		if m.name != "nftables" {
			per := make([]float64, 1500)
			slope := 1.1e-6
			if m.name == "iptables-legacy" {
				slope = 0.6e-6
			}
			for i := range per {
				per[i] = round4((2.1e-3 + slope*float64(i)) * math.Exp(rng.NormFloat64()*0.08))
			}
			add(Measurement{Name: MeasurePerRule, Params: map[string]string{"base": "0"}, Unit: UnitSeconds, Samples: per})
		}
		r.Runs = append(r.Runs, run)
	}
	type c struct{ name, result, reason, evidence string }
	cases := []c{
		{"[sig-network] Services should serve a basic endpoint from pods", CasePass, "", ""},
		{"[sig-network] Services should serve multiport endpoints from pods", CasePass, "", ""},
		{"[sig-network] Services should be able to create a functioning NodePort service", CasePass, "", ""},
		{"[sig-network] Services should have session affinity work for service with type clusterIP", CasePass, "", ""},
		{"[sig-network] Services should be rejected when no endpoints exist", CasePass, "", ""},
		{"[sig-network] Services should respect internalTrafficPolicy=Local", CasePass, "", ""},
	}
	for _, b := range []string{"iptables", "iptables-legacy", "nftables"} {
		for i, cs := range cases {
			if b == "iptables-legacy" && i == 3 {
				cs.result, cs.reason, cs.evidence = CaseFail, "2 of 50 connections from client-0 reached a second endpoint", "client-0 -> 10.96.0.12:80: pod-a x48, pod-b x2\nrecent list KUBE-SEP-ABC... expired early"
			}
			if b == "nftables" && i == 5 {
				cs.result, cs.reason = CaseSkip, "scenario has a single node"
			}
			r.Cases = append(r.Cases, Case{Name: cs.name, Backend: b, Result: cs.result, Reason: cs.reason, Evidence: cs.evidence, Duration: time.Duration(800+rng.IntN(900)) * time.Millisecond})
		}
	}
	return r
}

func round4(v float64) float64 {
	if v == 0 {
		return 0
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return f
}

// TestFixture keeps testdata/sample-results.json equal to sampleResults (run with -update
// to rewrite it) and checks it loads.
func TestFixture(t *testing.T) {
	want := sampleResults()
	if *update {
		dir := t.TempDir()
		require.NoError(t, want.Write(dir))
		data, err := os.ReadFile(dir + "/" + ResultsFile)
		require.NoError(t, err)
		require.NoError(t, writeFile(fixture, data))
	}
	got, err := Load(fixture)
	require.NoError(t, err)
	assert.Equal(t, want, got, "fixture is stale: go test ./reports -run TestFixture -update")
	assert.Len(t, got.Runs, 3)
	for _, run := range got.Runs {
		assert.NotEmpty(t, run.Measurements, fmt.Sprint(run.Backend))
	}
}
