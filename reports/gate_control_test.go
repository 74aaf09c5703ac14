package reports

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controlledABRun is a single-round A/B run of partial syncs, each beside its machine
// control: B's pass ran on a machine slower by busyB (both the syncs and their control),
// and B's syncs alone are slower by slowdown. interleaved false drops the controls' mark.
func controlledABRun(seed uint64, busyB, slowdown float64, interleaved bool) *Results {
	rng := rand.New(rand.NewPCG(seed, 3))
	res := &Results{}
	res.Declare(
		Metric{Measurement: MeasureSync, Match: map[string]string{"kind": "partial"}, Title: "partial sync", Unit: UnitSeconds,
			Better: LowerIsBetter, Gated: true, Test: TestLocation, MinSamples: 5, Control: SyncControl("partial")},
		Metric{Measurement: MeasureSync, Match: map[string]string{"kind": "partial" + ControlSuffix}, Title: "machine control", Unit: UnitSeconds, Better: LowerIsBetter},
	)
	mark := map[string]float64{ExtraInterleaved: 1}
	if !interleaved {
		mark = nil
	}
	for _, be := range []string{"a", "b"} {
		var fig, ctl []float64
		for range 10 {
			m := math.Exp(0.1 * rng.NormFloat64())
			f := 1.0
			if be == "b" {
				m *= busyB
				f = 1 + slowdown
			}
			fig = append(fig, 0.5*m*f*math.Exp(0.03*rng.NormFloat64()))
			ctl = append(ctl, 0.005*m*math.Exp(0.03*rng.NormFloat64()))
		}
		p := map[string]string{"services": "1000", RoundParam: "1"}
		res.Add(be, Measurement{Name: MeasureSync, Params: map[string]string{"kind": "partial", "services": p["services"], RoundParam: "1"}, Unit: UnitSeconds, Samples: fig})
		res.Add(be, Measurement{Name: MeasureSync, Params: map[string]string{"kind": "partial-control", "services": p["services"], RoundParam: "1"}, Unit: UnitSeconds, Samples: ctl, Extra: mark})
	}
	return res
}

// TestGateShowsTheControlledRatio: the gate judges the figures as measured and shows,
// beside them, B's per-sample ratio to its interleaved control over A's: a machine
// 1.5x busier during B's pass shows a controlled ratio near 1 while the raw ratio is
// 1.5; a 3x slower B beside a flat control fails with a controlled ratio near 3; A = B
// on one machine state passes.
func TestGateShowsTheControlledRatio(t *testing.T) {
	tests := []struct {
		name           string
		busyB, slow    float64
		interleaved    bool
		want           GateVerdict
		wantControlled float64
	}{
		{name: "A = B", busyB: 1, interleaved: true, want: GatePass, wantControlled: 1},
		{name: "A = B, B's pass 1.5x busier", busyB: 1.5, interleaved: true, want: GateRegression, wantControlled: 1},
		{name: "B 3x slower, flat control", busyB: 1, slow: 2, interleaved: true, want: GateRegression, wantControlled: 3},
		{name: "no interleaved control", busyB: 1, slow: 2, interleaved: false, want: GateRegression},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Gate(controlledABRun(7, tt.busyB, tt.slow, tt.interleaved), GateOptions{A: "a", B: "b", Threshold: 0.10, Seed: 1})
			require.NoError(t, err)
			require.Len(t, rep.Cells, 1)
			c := rep.Cells[0]
			assert.Equal(t, tt.want, c.Verdict, "%+v", c)
			assert.Equal(t, tt.interleaved, c.Controlled)
			if tt.interleaved {
				assert.InDelta(t, tt.wantControlled, c.ControlledRatio, 0.1*tt.wantControlled)
			}
		})
	}
}

// TestBlockResampleKeepsNeighbours: a moving-block resample is made of runs of
// ceil(sqrt(n)) consecutive samples of the original order, n in all.
func TestBlockResampleKeepsNeighbours(t *testing.T) {
	xs := make([]float64, 16)
	for i := range xs {
		xs[i] = float64(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		out := blockResample(nil, xs, rng)
		require.Len(t, out, len(xs))
		for b := 0; b < len(out); b += 4 { // blocks of sqrt(16) = 4
			blk := out[b : b+4]
			for i := 1; i < len(blk); i++ {
				assert.Equal(t, blk[i-1]+1, blk[i], "block %v is not consecutive", blk)
			}
		}
	}
	assert.Equal(t, []float64{5}, blockResample(nil, []float64{5}, rng))
	assert.True(t, slices.Equal(blockResample([]float64{9}, nil, rng), []float64{9}))
}
