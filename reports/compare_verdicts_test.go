package reports

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lookupRun is one backend's lookups at the sizes given, each with its interleaved
// established-connection control: connect samples around conn[size], control around
// ctl[size], 300 of each.
func lookupRun(seed uint64, interleaved bool, conn, ctl map[string]float64, tail bool) *Results {
	r := &Results{SchemaVersion: SchemaVersion}
	if interleaved {
		r.Declare(MetricsOf(MeasureLookup)...)
	} else {
		r.Declare(LegacyMetrics()...)
	}
	for _, size := range []string{"1000", "5000"} {
		c := around(seed, 300, conn[size], 0.1)
		if tail {
			for i := 0; i < len(c); i += 20 { // 5% of the samples 10x
				c[i] *= 10
			}
		}
		r.Add("iptables", Measurement{Name: MeasureLookup, Params: map[string]string{"services": size, "kind": "connect", "position": "first"}, Unit: UnitSeconds, Samples: c})
		m := Measurement{Name: MeasureLookup, Params: map[string]string{"services": size, "kind": "established", "position": "established"}, Unit: UnitSeconds,
			Samples: around(seed+100, 300, ctl[size], 0.1)}
		if interleaved {
			m.Extra = map[string]float64{ExtraInterleaved: 1}
		}
		r.Add("iptables", m)
	}
	return r
}

// TestCompareVerdictFailures: each way compare used to pass or misname what it could not
// see fails on purpose.
func TestCompareVerdictFailures(t *testing.T) {
	const lookup1k = "lookup/backend=iptables/services=1000/kind=connect/position=first"
	t.Run("+43% with one sample a side and ±35% pooled noise: cannot judge, not ~", func(t *testing.T) {
		run := func(seed uint64, v float64) *Results {
			r := &Results{SchemaVersion: SchemaVersion}
			r.Declare(LegacyMetrics()...)
			r.Add("iptables", Measurement{Name: MeasureSync, Params: map[string]string{"services": "1000", "kind": "full"}, Unit: UnitSeconds, Samples: around(seed, 5, 1, 0.6)})
			r.Add("iptables", Measurement{Name: MeasureSync, Params: map[string]string{"services": "5000", "kind": "full"}, Unit: UnitSeconds, Samples: []float64{v}})
			return r
		}
		c := Compare(run(1, 17.9), run(2, 17.9*1.43), CompareOptions{Threshold: 0.10, AllowUnjudged: false})
		d := c.Deltas[1]
		require.Equal(t, "sync/backend=iptables/services=5000/kind=full", d.Metric)
		assert.Equal(t, VerdictUnjudged, d.Verdict, d.Why)
		assert.Greater(t, d.Detectable, 0.43, "the test could not have seen 43%%")
		assert.Contains(t, d.Why, "could see a change of ±")
		require.ErrorContains(t, c.Err(), "cannot be judged")
		var out bytes.Buffer
		require.NoError(t, c.Write(&out))
		assert.Contains(t, out.String(), "SEES")
		assert.Contains(t, out.String(), seesString(d.Detectable))
		require.NoError(t, Compare(run(1, 17.9), run(2, 17.9*1.43), CompareOptions{Threshold: 0.10, AllowUnjudged: true}).Err())
	})
	t.Run("own control unchanged, another cell's control 50% slower: judged on its own, regression", func(t *testing.T) {
		oldRun := lookupRun(1, true, map[string]float64{"1000": 60e-6, "5000": 60e-6}, map[string]float64{"1000": 30e-6, "5000": 30e-6}, false)
		newRun := lookupRun(2, true, map[string]float64{"1000": 60e-6 * 1.3, "5000": 60e-6 * 1.5}, map[string]float64{"1000": 30e-6, "5000": 30e-6 * 1.5}, false)
		c := Compare(oldRun, newRun, CompareOptions{Threshold: 0.10})
		got := map[string]Verdict{}
		for _, d := range c.Deltas {
			got[d.Metric] = d.Verdict
		}
		assert.Equal(t, VerdictRegression, got[lookup1k], "the 5k cell's drift does not excuse the 1k cell")
		assert.Equal(t, VerdictDrift, got["lookup/backend=iptables/services=5000/kind=connect/position=first"], "its own control explains the 5k cell")
		require.ErrorContains(t, c.Err(), "1 metric(s) regressed beyond 10%: "+lookup1k)
	})
	t.Run("a regression after normalising names the figure that regressed", func(t *testing.T) {
		// Files of before interleaving: the control taken apart slowed 25%, the median
		// as much (unchanged normalised), and 5% of the connects stalled 10x: the tail
		// regressed, and the verdict must say so, not cite the median.
		oldRun := lookupRun(1, false, map[string]float64{"1000": 60e-6, "5000": 60e-6}, map[string]float64{"1000": 30e-6, "5000": 30e-6}, false)
		newRun := lookupRun(2, false, map[string]float64{"1000": 60e-6 * 1.25, "5000": 60e-6 * 1.25}, map[string]float64{"1000": 30e-6 * 1.25, "5000": 30e-6 * 1.25}, true)
		c := Compare(oldRun, newRun, CompareOptions{Threshold: 0.10})
		d := c.Deltas[0]
		require.Equal(t, lookup1k, d.Metric)
		assert.Equal(t, VerdictRegression, d.Verdict)
		assert.Contains(t, d.Why, "after normalising by the machine drift ×1.2")
		assert.Contains(t, d.Why, "p99 +", "the normalised regression is the tail")
		assert.NotContains(t, d.Why, "still -", "no regression named by a normalised figure that improved")
		assert.Equal(t, "p99/fisher", d.Test)
		require.ErrorContains(t, c.Err(), "regressed")
	})
	t.Run("a misfit in both runs fails", func(t *testing.T) {
		skewed := func(seed uint64) *Results {
			r := &Results{SchemaVersion: SchemaVersion}
			r.Declare(LegacyMetrics()...)
			r.Add("iptables", Measurement{Name: MeasureDistribution, Params: map[string]string{"services": "1000", "endpoints": "4", "expected": "uniform"}, Unit: UnitCount,
				Samples: []float64{700 + float64(seed), 100, 100, 100}})
			return r
		}
		c := Compare(skewed(1), skewed(2), CompareOptions{Threshold: 0.10})
		require.Len(t, c.Deltas, 1)
		assert.Equal(t, VerdictRegression, c.Deltas[0].Verdict)
		assert.Contains(t, c.Deltas[0].Why, "a misfit in both runs is still a misfit")
		require.ErrorContains(t, c.Err(), "misfit")
	})
}
