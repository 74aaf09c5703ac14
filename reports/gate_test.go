package reports

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var gateTestMetric = Metric{Measurement: MeasureSync, Match: map[string]string{"kind": "partial"}, Title: "partial sync",
	Unit: UnitSeconds, Better: LowerIsBetter, Gated: true, Test: TestLocation, MinSamples: 5}

// abRun builds a run of backends a and b over rounds, n samples each per round, with a
// machine drift per round that hits both sides; b's samples are scaled by slowdown.
func abRun(seed uint64, rounds, n int, slowdown float64, drift []float64) *Results {
	rng := rand.New(rand.NewPCG(seed, 1))
	res := &Results{Metrics: []Metric{gateTestMetric}}
	sample := func(d float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = d * 0.5 * math.Exp(0.15*rng.NormFloat64()) // lognormal around 0.5 s
		}
		return s
	}
	for r := range rounds {
		d := 1.0
		if r < len(drift) {
			d = drift[r]
		}
		order := []string{"a", "b"}
		if r%2 == 1 {
			order = []string{"b", "a"}
		}
		for _, be := range order {
			s := sample(d)
			if be == "b" {
				for i := range s {
					s[i] *= 1 + slowdown
				}
			}
			res.Add(be, Measurement{Name: MeasureSync, Params: map[string]string{"kind": "partial", "services": "1000", RoundParam: strconv.Itoa(r)}, Unit: UnitSeconds, Samples: s})
		}
	}
	return res
}

func TestGateAEqualsBNoFalseAlarm(t *testing.T) {
	for seed := range uint64(50) {
		rep, err := Gate(abRun(seed, 3, 10, 0, []float64{1, 1.6, 0.8}), GateOptions{A: "a", B: "b", Threshold: 0.10, Seed: seed})
		require.NoError(t, err)
		assert.Empty(t, rep.Failed(false), "seed %d: A = B failed the gate", seed)
	}
}

func TestGateCatchesInjectedSlowdown(t *testing.T) {
	tests := []struct {
		slowdown  float64
		threshold float64
		want      GateVerdict
	}{
		{slowdown: 0.25, threshold: 0.10, want: GateRegression},
		{slowdown: 0.50, threshold: 0.10, want: GateRegression},
		{slowdown: 0.25, threshold: 0.50, want: GatePass}, // beyond the interval, within the threshold
		{slowdown: -0.30, threshold: 0.10, want: GateBetter},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatFloat(tt.slowdown, 'f', 2, 64), func(t *testing.T) {
			// Drift of the machine between rounds much larger than the slowdown.
			rep, err := Gate(abRun(7, 3, 10, tt.slowdown, []float64{1, 2, 0.7}), GateOptions{A: "a", B: "b", Threshold: tt.threshold})
			require.NoError(t, err)
			require.Len(t, rep.Cells, 1)
			c := rep.Cells[0]
			assert.Equal(t, tt.want, c.Verdict, "ratio %.3f [%.3f, %.3f] p %.2g", c.Ratio, c.Low, c.High, c.P)
			assert.InDelta(t, 1+tt.slowdown, c.Ratio, 0.15)
			var out bytes.Buffer
			require.NoError(t, rep.Write(&out))
			assert.Contains(t, out.String(), string(tt.want))
		})
	}
}

func TestGateCannotJudge(t *testing.T) {
	few := abRun(1, 1, 3, 0, nil) // 3 samples per side, the metric needs 5
	rep, err := Gate(few, GateOptions{A: "a", B: "b", Threshold: 0.1})
	require.NoError(t, err)
	assert.Equal(t, GateUnjudged, rep.Cells[0].Verdict)
	assert.Len(t, rep.Failed(false), 1, "cannot judge fails the gate")
	assert.Empty(t, rep.Failed(true), "unless allowed")

	oneSided := abRun(1, 1, 10, 0, nil)
	oneSided.Add("a", Measurement{Name: MeasureSync, Params: map[string]string{"kind": "partial", "services": "5000"}, Unit: UnitSeconds, Samples: []float64{1, 2, 3, 4, 5}})
	rep, err = Gate(oneSided, GateOptions{A: "a", B: "b", Threshold: 0.1})
	require.NoError(t, err)
	require.Len(t, rep.Cells, 2)
	assert.Len(t, rep.Failed(false), 1)
	assert.Contains(t, rep.Failed(false)[0].Reason, "on A only")
}

func TestGateFit(t *testing.T) {
	fit := Metric{Measurement: MeasureDistribution, Gated: true, Test: TestFit, MinSamples: 2, Unit: UnitCount}
	dist := func(counts ...float64) Measurement {
		m := Measurement{Name: MeasureDistribution, Unit: UnitCount, Samples: counts, Extra: map[string]float64{}}
		for i := range counts {
			m.Extra["share_"+strconv.Itoa(i)] = 1 / float64(len(counts))
		}
		return m
	}
	res := &Results{Metrics: []Metric{fit}}
	res.Add("a", dist(101, 98, 99, 102, 100, 97, 103, 100, 99, 101))
	res.Add("b", dist(500, 55, 56, 54, 57, 53, 55, 56, 59, 55)) // half the connections on one endpoint
	rep, err := Gate(res, GateOptions{A: "a", B: "b", Threshold: 0.1})
	require.NoError(t, err)
	assert.Equal(t, GateRegression, rep.Cells[0].Verdict, rep.Cells[0].Reason)

	same := &Results{Metrics: []Metric{fit}}
	same.Add("a", dist(101, 98, 99, 102, 100, 97, 103, 100, 99, 101))
	same.Add("b", dist(99, 103, 98, 100, 101, 99, 100, 102, 97, 101))
	rep, err = Gate(same, GateOptions{A: "a", B: "b", Threshold: 0.1})
	require.NoError(t, err)
	assert.Equal(t, GatePass, rep.Cells[0].Verdict)
}

func TestGateBadInput(t *testing.T) {
	res := abRun(1, 1, 10, 0, nil)
	for _, o := range []GateOptions{{A: "a", B: "c"}, {A: "a", B: "a"}, {B: "b"}, {A: "a", B: "b", Confidence: 1.5}} {
		_, err := Gate(res, o)
		assert.Error(t, err, "%+v", o)
	}
	_, err := Gate(&Results{Runs: []Run{{Backend: "a"}, {Backend: "b"}}}, GateOptions{A: "a", B: "b"})
	assert.ErrorContains(t, err, "no gated metric")
}

// TestGateRoundsMustAgree: a pooled difference that one round contradicts is drift.
func TestGateRoundsMustAgree(t *testing.T) {
	res := &Results{Metrics: []Metric{gateTestMetric}}
	add := func(be, round string, v float64) {
		s := make([]float64, 20)
		for i := range s {
			s[i] = v * (1 + 0.01*float64(i))
		}
		res.Add(be, Measurement{Name: MeasureSync, Params: map[string]string{"kind": "partial", RoundParam: round}, Unit: UnitSeconds, Samples: s})
	}
	add("a", "0", 1)
	add("b", "0", 3) // B 3x slower in round 0 ...
	add("a", "1", 1)
	add("b", "1", 0.95) // ... and faster in round 1
	rep, err := Gate(res, GateOptions{A: "a", B: "b", Threshold: 0.1})
	require.NoError(t, err)
	assert.Equal(t, GatePass, rep.Cells[0].Verdict)
	assert.Contains(t, rep.Cells[0].Reason, "round 1 disagrees")

	res.Runs[1].Measurements[1].Samples = []float64{1.5, 1.6, 1.7, 1.8, 1.9, 2, 2.1, 2.2, 2.3, 2.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2, 2.1, 2.2, 2.3, 2.4}
	rep, err = Gate(res, GateOptions{A: "a", B: "b", Threshold: 0.1})
	require.NoError(t, err)
	assert.Equal(t, GateRegression, rep.Cells[0].Verdict, "both rounds agree")
}

// TestGateAlphaAsWritten: the gate prints its level as a person wrote it.
func TestGateAlphaAsWritten(t *testing.T) {
	tests := []struct {
		confidence float64
		want       string
	}{
		{0.95, "= 0.05/1 cells"},
		{0.99, "= 0.01/1 cells"},
		{0.9, "= 0.1/1 cells"},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatFloat(tt.confidence, 'g', -1, 64), func(t *testing.T) {
			rep, err := Gate(abRun(1, 1, 10, 0, nil), GateOptions{A: "a", B: "b", Threshold: 0.10, Confidence: tt.confidence})
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, rep.Write(&b))
			assert.Contains(t, b.String(), tt.want)
			assert.NotContains(t, b.String(), "0000000")
		})
	}
}
