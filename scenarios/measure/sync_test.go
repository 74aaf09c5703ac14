package measure

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/agent"
	"kpbench.dev/kpbench/reports"
)

// scriptedProxy syncs as its script says: each change appends the next records.
type scriptedProxy struct {
	script [][]agent.SyncRecord
	recs   []agent.SyncRecord
}

func (p *scriptedProxy) Node() string { return "node-0" }
func (p *scriptedProxy) ForceSync(context.Context, bool) (agent.SyncRecord, error) {
	return agent.SyncRecord{}, errors.New("not scripted")
}
func (p *scriptedProxy) Records() []agent.SyncRecord { return p.recs }
func (p *scriptedProxy) Metrics() agent.Metrics      { return agent.Metrics{} }
func (p *scriptedProxy) Backend() backends.Backend   { return nil }

func (p *scriptedProxy) change(context.Context, int) error {
	if len(p.script) == 0 {
		return errors.New("script exhausted")
	}
	p.recs = append(p.recs, p.script[0]...)
	p.script = p.script[1:]
	return nil
}

func syncRec(full bool, d time.Duration) agent.SyncRecord {
	t0 := time.Unix(1000, 0)
	return agent.SyncRecord{Start: t0, End: t0.Add(d), Result: backends.SyncResult{Full: full}}
}

// TestSyncPartialNeverRecordsAFullSync: a full sync the proxy does where a partial one is
// timed (it once made a 210 s "partial" at 5k services) is kept apart as sync-unplanned-full, and
// the change is made again; too many in a row fail the measurement with the cause.
func TestSyncPartialNeverRecordsAFullSync(t *testing.T) {
	lost := syncRec(true, 200*time.Second)
	lost.StateLost = errors.New("canary chain KUBE-PROXY-CANARY missing")
	tests := []struct {
		name          string
		script        [][]agent.SyncRecord
		repeats       int
		wantPartial   []float64
		wantUnplanned []float64
		wantErr       string
	}{
		{name: "partials only", repeats: 2,
			script:      [][]agent.SyncRecord{{syncRec(false, time.Second)}, {syncRec(false, 2*time.Second)}},
			wantPartial: []float64{1, 2}},
		{name: "a full sync first, then the partial in the same change", repeats: 1,
			script:      [][]agent.SyncRecord{{syncRec(true, 200*time.Second), syncRec(false, time.Second)}},
			wantPartial: []float64{1}, wantUnplanned: []float64{200}},
		{name: "a full sync alone: the change is made again", repeats: 1,
			script:      [][]agent.SyncRecord{{syncRec(true, 200*time.Second)}, {syncRec(false, 3*time.Second)}},
			wantPartial: []float64{3}, wantUnplanned: []float64{200}},
		{name: "full syncs every time: an error naming the cause", repeats: 1,
			script:  [][]agent.SyncRecord{{lost}, {lost}, {lost}, {lost}},
			wantErr: "4 full syncs in a row where a partial one was timed (state check failed: canary chain KUBE-PROXY-CANARY missing)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &scriptedProxy{script: tt.script}
			ms, err := Sync(context.Background(), p, false, tt.repeats, p.change, nil, nil)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			got := map[string][]float64{}
			for _, m := range ms {
				assert.Equal(t, "partial", m.Params["kind"])
				got[m.Name] = m.Samples
			}
			assert.Equal(t, tt.wantPartial, got[reports.MeasureSync])
			assert.Equal(t, tt.wantUnplanned, got[reports.MeasureSyncUnplannedFull])
		})
	}
}

// TestSyncBracketsEachSyncWithTheControl: the machine control is timed before and after
// every timed sync, its sum is sample i of kind "<kind>-control", marked interleaved;
// without a control function there is no control measurement.
func TestSyncBracketsEachSyncWithTheControl(t *testing.T) {
	p := &scriptedProxy{script: [][]agent.SyncRecord{{syncRec(false, time.Second)}, {syncRec(false, 2*time.Second)}}}
	calls := 0
	control := func() time.Duration { calls++; return time.Duration(calls) * time.Millisecond }
	ms, err := Sync(context.Background(), p, false, 2, p.change, control, nil)
	require.NoError(t, err)
	var ctl *Measurement
	for i := range ms {
		if ms[i].Params["kind"] == "partial-control" {
			ctl = &ms[i]
		}
	}
	require.NotNil(t, ctl)
	assert.Equal(t, []float64{0.003, 0.007}, ctl.Samples) // 1+2 ms, 3+4 ms
	assert.Equal(t, 1.0, ctl.Extra[reports.ExtraInterleaved])
	assert.Equal(t, 4, calls)

	p = &scriptedProxy{script: [][]agent.SyncRecord{{syncRec(false, time.Second)}}}
	ms, err = Sync(context.Background(), p, false, 1, p.change, nil, nil)
	require.NoError(t, err)
	for _, m := range ms {
		assert.NotEqual(t, "partial-control", m.Params["kind"])
	}
}
