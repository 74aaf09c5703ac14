package reports

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pairedShape shapes a run whose controls were taken interleaved with their figures:
// every round (a lookup round, a sync) sees a machine factor shared by the figure and its
// control, as a busy machine slows both.
type pairedShape struct {
	seed uint64
	// machine multiplies the median machine factor (a busier machine: both slower).
	machine float64
	// load is the log-sd of the machine factor from round to round (0: 0.3).
	load float64
	// figure multiplies the figures alone (the code got slower).
	figure float64
	// interleaved false writes the controls without the mark, as files written before.
	notInterleaved bool
}

// pairedRun is one backend with 5 full syncs beside their machine control and 200
// lookups per position beside their established control.
func pairedRun(s pairedShape) *Results {
	rng := rand.New(rand.NewPCG(s.seed, 7))
	load := s.load
	if load == 0 {
		load = 0.3
	}
	r := &Results{SchemaVersion: SchemaVersion}
	r.Declare(
		Metric{Measurement: MeasureSync, Match: map[string]string{"kind": "full"}, Title: "full sync", Unit: UnitSeconds, Better: LowerIsBetter,
			Gated: true, Test: TestLocation, MinSamples: 5, Statistics: []string{"p50"}, Control: SyncControl("full")},
		Metric{Measurement: MeasureSync, Match: map[string]string{"kind": "full" + ControlSuffix}, Title: "machine control", Unit: UnitSeconds, Better: LowerIsBetter},
		Metric{Measurement: MeasureLookup, Match: map[string]string{"kind": "connect"}, Title: "first-packet latency", Unit: UnitSeconds, Better: LowerIsBetter,
			Gated: true, Test: TestLocation, MinSamples: 50, Statistics: []string{"p50", "p99"}, Control: LookupControl()},
		Metric{Measurement: MeasureLookup, Match: map[string]string{"kind": "established"}, Title: "control", Unit: UnitSeconds, Better: LowerIsBetter},
	)
	mark := map[string]float64{ExtraInterleaved: 1}
	if s.notInterleaved {
		mark = nil
	}
	pair := func(n int, fig, ctl float64, figures int) ([][]float64, []float64) {
		figs := make([][]float64, figures)
		var ctls []float64
		for range n {
			m := orOne(s.machine) * math.Exp(rng.NormFloat64()*load)
			for j := range figs {
				figs[j] = append(figs[j], fig*orOne(s.figure)*m*math.Exp(rng.NormFloat64()*0.05))
			}
			ctls = append(ctls, ctl*m*math.Exp(rng.NormFloat64()*0.05))
		}
		return figs, ctls
	}
	p := func(kv ...string) map[string]string {
		m := map[string]string{"services": "1000"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	figs, ctl := pair(5, 0.3, 0.005, 1)
	r.Add("iptables", Measurement{Name: MeasureSync, Params: p("kind", "full"), Unit: UnitSeconds, Samples: figs[0]})
	r.Add("iptables", Measurement{Name: MeasureSync, Params: p("kind", "full-control"), Unit: UnitSeconds, Samples: ctl, Extra: mark})
	figs, ctl = pair(200, 60e-6, 20e-6, 3)
	for i, pos := range []string{"first", "middle", "last"} {
		r.Add("iptables", Measurement{Name: MeasureLookup, Params: p("kind", "connect", "position", pos), Unit: UnitSeconds, Samples: figs[i]})
	}
	r.Add("iptables", Measurement{Name: MeasureLookup, Params: p("kind", "established", "position", "established"), Unit: UnitSeconds, Samples: ctl, Extra: mark})
	return r
}

// TestComparePairedControls: a figure whose control was taken interleaved with it is
// judged by its per-sample ratio to the control. A machine that slowed both (the busy
// half of a same-commit pair) is drift and passes; the code slowed 3x beside a flat
// control is a regression; beside a control that moved too it is DRIFT? (fails only
// under --strict); a ratio that moved less than the minimum effect is drift (beyond it,
// with the minimum effect switched off, DRIFT?); on an unchanged machine there is no
// drift to explain and the figure is judged as measured; files whose controls were not interleaved
// keep the median rule (a flat control normalises nothing).
func TestComparePairedControls(t *testing.T) {
	const full = "sync/backend=iptables/services=1000/kind=full"
	lookups := []string{
		"lookup/backend=iptables/services=1000/kind=connect/position=first",
		"lookup/backend=iptables/services=1000/kind=connect/position=middle",
		"lookup/backend=iptables/services=1000/kind=connect/position=last",
	}
	all := append([]string{full}, lookups...)
	tests := []struct {
		name   string
		newRun pairedShape
		opts   CompareOptions
		want   Verdict // of the sync and the three lookups
		fail   bool
	}{
		{name: "a machine 2x slower in NEW, control slowed alike: drift", newRun: pairedShape{machine: 2}, want: VerdictDrift},
		{name: "3x slower code beside a flat control: regression", newRun: pairedShape{figure: 3}, want: VerdictRegression, fail: true},
		{name: "3x slower code on a machine 1.5x slower: the control moved, DRIFT?", newRun: pairedShape{figure: 3, machine: 1.5}, want: VerdictUnexplainedDrift},
		{name: "the same under --strict fails", newRun: pairedShape{figure: 3, machine: 1.5}, opts: CompareOptions{Strict: true}, want: VerdictUnexplainedDrift, fail: true},
		{name: "15% slower code on a machine 2x slower: within the minimum effect", newRun: pairedShape{figure: 1.15, machine: 2}, want: VerdictDrift},
		{name: "15% slower code, same machine: no drift to explain, regression", newRun: pairedShape{figure: 1.15}, want: VerdictRegression, fail: true},
		{name: "15% slower code on a machine 2x slower without a minimum effect: DRIFT?", newRun: pairedShape{figure: 1.15, machine: 2}, opts: CompareOptions{MinEffect: -1}, want: VerdictUnexplainedDrift},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Threshold = 0.10
			tt.newRun.seed = 2
			tt.newRun.load = 0.05 // quiet within each run: the rank test sees the shift
			c := Compare(pairedRun(pairedShape{seed: 1, load: 0.05}), pairedRun(tt.newRun), opts)
			got := map[string]Verdict{}
			for _, d := range c.Deltas {
				got[d.Metric] = d.Verdict
			}
			for _, m := range all {
				assert.Equal(t, tt.want, got[m], m)
			}
			var out bytes.Buffer
			require.NoError(t, c.Write(&out))
			if tt.fail {
				assert.Error(t, c.Err(), out.String())
			} else {
				assert.NoError(t, c.Err(), out.String())
			}
		})
	}
	t.Run("per-sample ratio cancels load that varies round to round", func(t *testing.T) {
		// Both runs busy in bursts (log-sd 0.5 a round), NEW's bursts larger: raw
		// figures differ, ratios do not.
		c := Compare(pairedRun(pairedShape{seed: 1, load: 0.5}), pairedRun(pairedShape{seed: 2, load: 0.5, machine: 1.6}), CompareOptions{Threshold: 0.10})
		require.NoError(t, c.Err())
	})
	t.Run("a control that moved with the figure, less than the threshold: drift", func(t *testing.T) {
		// The machine +9% (the control's move, within the threshold) and +6% more on the
		// figures alone: +15.5% as measured, +6% against the control, within 10%. With
		// the machine unchanged, the same +15.5% in the code alone is a regression.
		for _, tc := range []struct {
			newRun pairedShape
			want   Verdict
		}{
			{pairedShape{seed: 2, load: 0.05, machine: 1.09, figure: 1.06}, VerdictDrift},
			{pairedShape{seed: 2, load: 0.05, figure: 1.155}, VerdictRegression},
		} {
			c := Compare(pairedRun(pairedShape{seed: 1, load: 0.05}), pairedRun(tc.newRun), CompareOptions{Threshold: 0.10})
			var out bytes.Buffer
			require.NoError(t, c.Write(&out))
			for _, d := range c.Deltas {
				if slices.Contains(lookups, d.Metric) {
					assert.Equal(t, tc.want, d.Verdict, "%s\n%s", d.Metric, out.String())
				}
			}
		}
	})
	t.Run("controls not interleaved (older files): the median rule", func(t *testing.T) {
		c := Compare(pairedRun(pairedShape{seed: 1, load: 0.05, notInterleaved: true}),
			pairedRun(pairedShape{seed: 2, load: 0.05, figure: 3, notInterleaved: true}), CompareOptions{Threshold: 0.10})
		require.Error(t, c.Err())
		for _, d := range c.Deltas {
			if d.Metric == full {
				assert.Equal(t, VerdictRegression, d.Verdict)
			}
		}
	})
}

// TestComparePairedSeesWhatJudged: a figure too noisy as measured (a machine whose load
// swings ±60% round to round) but judged "~" by its ratio to the interleaved control shows
// the ratio's SEES, the reach of the test that decided, never the raw figure's wider one.
func TestComparePairedSeesWhatJudged(t *testing.T) {
	c := Compare(pairedRun(pairedShape{seed: 1, load: 0.6}), pairedRun(pairedShape{seed: 2, load: 0.6}), CompareOptions{Threshold: 0.10})
	judged := 0
	for _, d := range c.Deltas {
		if d.Verdict != VerdictSame || !d.Decl.Gated {
			continue
		}
		assert.LessOrEqual(t, d.Detectable, 0.10, "%s: %s with SEES %.3f", d.Metric, d.Test, d.Detectable)
		if d.Test == "mann-whitney of the ratio to its control" {
			judged++
		}
	}
	assert.Positive(t, judged, "no figure was judged by its ratio: the case does not test it")
}

// tailRun is one backend's lookups at 1k, 1,500 rounds, with stalls (x4, in 3% of the
// samples, each sample on its own) added to the connects, to their established control,
// or to both: a busy machine stretches tails and leaves medians where they were.
func tailRun(seed uint64, stallFigures, stallControl bool) *Results {
	rng := rand.New(rand.NewPCG(seed, 11))
	r := &Results{SchemaVersion: SchemaVersion}
	r.Declare(
		Metric{Measurement: MeasureLookup, Match: map[string]string{"kind": "connect"}, Title: "first-packet latency", Unit: UnitSeconds, Better: LowerIsBetter,
			Gated: true, Test: TestLocation, MinSamples: 50, Statistics: []string{"p50", "p99"}, Control: LookupControl()},
		Metric{Measurement: MeasureLookup, Match: map[string]string{"kind": "established"}, Title: "control", Unit: UnitSeconds, Better: LowerIsBetter},
	)
	sample := func(median float64, stalls bool) float64 {
		v := median * math.Exp(rng.NormFloat64()*0.3)
		if stalls && rng.Float64() < 0.03 {
			v *= 4
		}
		return v
	}
	series := func(median float64, stalls bool) []float64 {
		s := make([]float64, 1500)
		for i := range s {
			s[i] = sample(median, stalls)
		}
		return s
	}
	p := func(kind, pos string) map[string]string {
		return map[string]string{"services": "1000", "kind": kind, "position": pos}
	}
	r.Add("iptables", Measurement{Name: MeasureLookup, Params: p("connect", "last"), Unit: UnitSeconds, Samples: series(90e-6, stallFigures)})
	r.Add("iptables", Measurement{Name: MeasureLookup, Params: p("established", "established"), Unit: UnitSeconds, Samples: series(42e-6, stallControl),
		Extra: map[string]float64{ExtraInterleaved: 1}})
	return r
}

// TestComparePairedTails: a connect's p99 that grew with its median unchanged is set
// against its control's p99, not the control's median. A busy machine that stretched the
// tails of both (the connect p99 +77% beside its control's p99 +80% in a make bench beside
// a make test) is drift and passes; stalls in the connects alone, the control's tail
// unchanged, are a regression.
func TestComparePairedTails(t *testing.T) {
	const last = "lookup/backend=iptables/services=1000/kind=connect/position=last"
	tests := []struct {
		name                       string
		stallFigures, stallControl bool
		want                       Verdict
	}{
		{name: "tails of both stretched: drift", stallFigures: true, stallControl: true, want: VerdictDrift},
		{name: "the connects' tail alone: regression", stallFigures: true, want: VerdictRegression},
		{name: "the control's tail alone: the connects unchanged", stallControl: true, want: VerdictSame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tailRun(1, false, false), tailRun(2, tt.stallFigures, tt.stallControl), CompareOptions{Threshold: 0.10})
			var out bytes.Buffer
			require.NoError(t, c.Write(&out))
			i := slices.IndexFunc(c.Deltas, func(d Delta) bool { return d.Metric == last })
			require.GreaterOrEqual(t, i, 0, out.String())
			assert.Equal(t, tt.want, c.Deltas[i].Verdict, out.String())
			assert.Equal(t, tt.want == VerdictRegression, c.Err() != nil, out.String())
		})
	}
}
