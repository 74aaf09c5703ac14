package reports

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStampStep(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	r := &Results{}
	r.Add("iptables", Measurement{Name: MeasureSync, Unit: UnitSeconds, Samples: []float64{1}, Step: "earlier"})
	mk := r.Mark()
	r.Add("iptables", Measurement{Name: MeasureSync, Unit: UnitSeconds, Samples: []float64{2}})
	r.Add("nftables", Measurement{Name: MeasureSync, Unit: UnitSeconds, Samples: []float64{3}})
	r.StampStep(mk, "full-sync-5k", t0, t0.Add(time.Minute))

	assert.Equal(t, "earlier", r.Runs[0].Measurements[0].Step, "a measurement added before the mark keeps its step")
	assert.True(t, r.Runs[0].Measurements[0].Start.IsZero())
	for _, m := range []Measurement{r.Runs[0].Measurements[1], r.Runs[1].Measurements[0]} {
		assert.Equal(t, "full-sync-5k", m.Step)
		assert.Equal(t, t0, m.Start)
		assert.Equal(t, t0.Add(time.Minute), m.End)
	}
}

func TestSampleTime(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	m := Measurement{Samples: []float64{1, 2}, Start: t0, Offsets: []float64{0.5, 2}}
	got, ok := m.SampleTime(1)
	require.True(t, ok)
	assert.Equal(t, t0.Add(2*time.Second), got)
	_, ok = m.SampleTime(2)
	assert.False(t, ok, "out of range")
	m.Offsets = nil
	_, ok = m.SampleTime(0)
	assert.False(t, ok, "no offsets recorded")
}

// TestStepFieldsOmittedWhenUnset keeps results.json of measurements without a step as
// it was: the new fields appear only when recorded.
func TestStepFieldsOmittedWhenUnset(t *testing.T) {
	data, err := json.Marshal(Measurement{Name: MeasureSync, Unit: UnitSeconds, Samples: []float64{1}})
	require.NoError(t, err)
	for _, f := range []string{`"step"`, `"start"`, `"end"`, `"offsets"`} {
		assert.NotContains(t, string(data), f)
	}
}

func TestMeasured(t *testing.T) {
	tests := []struct {
		name string
		m    Measurement
		want bool
	}{
		{"no samples", Measurement{Unit: UnitSeconds}, false},
		{"zero seconds only: not measured", Measurement{Unit: UnitSeconds, Samples: []float64{0, 0}}, false},
		{"one real duration", Measurement{Unit: UnitSeconds, Samples: []float64{0, 0.2}}, true},
		{"a zero count is a figure", Measurement{Unit: UnitCount, Samples: []float64{0}}, true},
		{"a negative size is not (host-wide memory growth swamped by others)", Measurement{Unit: UnitBytes, Samples: []float64{-2.9e6}}, false},
		{"a size", Measurement{Unit: UnitBytes, Samples: []float64{3e6}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.m.Measured())
		})
	}
	r := &Results{}
	r.Add("nftables", Measurement{Name: "sync-apply-cpu", Params: map[string]string{"services": "1000"}, Unit: UnitSeconds, Samples: []float64{0, 0, 0}})
	r.Add("iptables", Measurement{Name: "sync-apply-cpu", Params: map[string]string{"services": "1000"}, Unit: UnitSeconds, Samples: []float64{1, 1, 1}})
	rows := comparisonRows(r)
	require.Len(t, rows, 1)
	assert.Equal(t, "—", rows[0].cellText("nftables"), "an unmeasured CPU time shows —, never 0 s")
	assert.Empty(t, rows[0].ratioText())
}
