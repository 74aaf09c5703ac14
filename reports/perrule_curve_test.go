package reports

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// perRuleResults builds a run of the per-rule scenario: at each size, five Service
// additions costing service(n) seconds each (8 rules of rule(n) each) and restores.
func perRuleResults(sizes []int, service func(n int) float64) *Results {
	run := Run{Backend: "iptables-perrule"}
	add := func(m Measurement) {
		m.Summary = Summarize(m.Samples)
		run.Measurements = append(run.Measurements, m)
	}
	for _, n := range sizes {
		p := func(kv ...string) map[string]string {
			m := map[string]string{"services": strconv.Itoa(n)}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		c := service(n)
		add(Measurement{Name: MeasurePerRuleService, Params: p(), Unit: UnitSeconds, Samples: []float64{c, c, c, c, c}, Extra: map[string]float64{"rules_added": 8}})
		add(Measurement{Name: MeasurePerRule, Params: p("base", strconv.Itoa(8*n)), Unit: UnitSeconds, Samples: []float64{c / 16, c / 16}})
		if n > 0 {
			add(Measurement{Name: MeasurePerRuleRestore, Params: p("kind", "full"), Unit: UnitSeconds, Samples: []float64{2e-4 * float64(n)}})
			add(Measurement{Name: MeasurePerRuleRestore, Params: p("kind", "partial"), Unit: UnitSeconds, Samples: []float64{1e-4 * float64(n)}})
		}
	}
	return &Results{Environment: Environment{KernelRelease: "6.18.0", IPTablesVersion: "iptables v1.8.9 (legacy)"}, Runs: []Run{run}}
}

func TestPerRuleCurveIntegrates(t *testing.T) {
	tests := []struct {
		name    string
		sizes   []int
		service func(n int) float64
		// want is Program at each size.
		want []float64
	}{
		{"constant cost: linear time", []int{0, 1000, 5000}, func(int) float64 { return 0.5 }, []float64{0, 500, 2500}},
		{"linear cost: quadratic time", []int{0, 1000, 2000}, func(n int) float64 { return 1 + float64(n)/1000 }, []float64{0, 1500, 4000}},
		{"no point at 0: flat before the first size", []int{1000, 2000}, func(n int) float64 { return float64(n) / 1000 }, []float64{1000, 2500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			curves := PerRuleCurves(perRuleResults(tt.sizes, tt.service))
			require.Len(t, curves, 1)
			require.Len(t, curves[0].Sizes, len(tt.sizes))
			for i, s := range curves[0].Sizes {
				assert.Equal(t, tt.sizes[i], s.Services)
				assert.InDelta(t, tt.want[i], s.Program, 1e-9, "program %d", s.Services)
				assert.InDelta(t, tt.want[i]/2, s.ProgramRules, 1e-9, "the rules are half of each Service here")
			}
		})
	}
}

func TestPerRuleVerdict(t *testing.T) {
	sizes := []int{0, 1000, 2000, 5000, 10000, 20000}
	tests := []struct {
		name    string
		sizes   []int
		service func(n int) float64
		want    []string
	}{
		// 0.1 s + 0.2 ms per Service already there: 5k in 50 min, 20k in 11.7 h.
		{"slow per-rule adds: the claim holds", sizes, func(n int) float64 { return 0.1 + 2e-4*float64(n) }, []string{
			"The seeds' claim holds on this machine (kernel 6.18.0, iptables-legacy v1.8.9)",
			"5,000 Services in 50 min", "the seeds: 11 min", "20,000 Services in 11.7 h",
			"iptables-restore writes the whole table of 20,000 Services in 4 s"}},
		// Fault: the per-rule adds are 100 times cheaper; the claim must not hold.
		{"fast per-rule adds: the claim does not hold", sizes, func(n int) float64 { return (0.1 + 2e-4*float64(n)) / 100 }, []string{
			"The seeds' claim does not hold"}},
		{"a ladder that stops at 5k names 20k as not measured", sizes[:4], func(n int) float64 { return 0.1 + 2e-4*float64(n) }, []string{
			"claim holds", "Not measured: 20,000 Services."}},
		{"no claimed size measured", sizes[:3], func(n int) float64 { return 1 }, []string{
			"is not tested by this run", "5,000 or 20,000 Services"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := perRuleResults(tt.sizes, tt.service)
			curves := PerRuleCurves(r)
			require.Len(t, curves, 1)
			v := curves[0].Verdict(r.Environment)
			for _, w := range tt.want {
				assert.Contains(t, v, w)
			}
		})
	}
}

func TestPerRuleCurveFigure(t *testing.T) {
	r := perRuleResults([]int{0, 1000, 5000, 20000}, func(n int) float64 { return 0.1 + 2e-4*float64(n) })
	figs, err := (&drawer{r: r, palette: backends(r)}).perRuleCurve()
	require.NoError(t, err)
	require.Len(t, figs, 1)
	assert.Equal(t, "perrule-curve", figs[0].Name)
	assert.Len(t, figs[0].Panels, 2)
	assert.Contains(t, figs[0].Note, "The seeds' claim holds")
	_, err = render(figs[0], "png")
	require.NoError(t, err)

	none, err := (&drawer{r: &Results{}}).perRuleCurve()
	require.NoError(t, err)
	assert.Empty(t, none, "no per-rule measurements, no chart")
}
