package measure

import (
	"context"
	"errors"
	"sync/atomic"
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

// TestSyncControlSharesTheSyncWindow: the machine control runs through every timed sync,
// not only around it, so that it meets what the sync meets; its sample i is twice its
// mean unit in sync i's window, of kind "<kind>-control", marked interleaved. The control
// here is slow (4 ms) only while the sync runs, as a busy machine is to a control that
// competes with the sync's own processes: timed only before and after, it would give
// 1+1 ms and see nothing. Without a control function there is no control measurement.
func TestSyncControlSharesTheSyncWindow(t *testing.T) {
	p := &scriptedProxy{script: [][]agent.SyncRecord{{syncRec(false, time.Second)}}}
	var syncing atomic.Bool
	var unitsDuring atomic.Int32
	seen := make(chan struct{})
	control := func() time.Duration {
		if syncing.Load() {
			if unitsDuring.Add(1) == 3 {
				close(seen)
			}
			return 4 * time.Millisecond
		}
		return time.Millisecond
	}
	change := func(ctx context.Context, i int) error {
		syncing.Store(true)
		defer syncing.Store(false)
		select { // the sync lasts until the control has run three units inside it
		case <-seen:
		case <-time.After(10 * time.Second):
			return errors.New("the control never ran while the sync did")
		}
		return p.change(ctx, i)
	}
	ms, err := Sync(context.Background(), p, false, 1, change, control, nil)
	require.NoError(t, err)
	var ctl *Measurement
	for i := range ms {
		if ms[i].Params["kind"] == "partial-control" {
			ctl = &ms[i]
		}
	}
	require.NotNil(t, ctl)
	require.Len(t, ctl.Samples, 1)
	assert.Greater(t, ctl.Samples[0], 0.002, "the control must see the sync's window, not only its edges")
	assert.Less(t, ctl.Samples[0], 0.008)
	assert.Equal(t, 1.0, ctl.Extra[reports.ExtraInterleaved])

	p = &scriptedProxy{script: [][]agent.SyncRecord{{syncRec(false, time.Second)}}}
	ms, err = Sync(context.Background(), p, false, 1, p.change, nil, nil)
	require.NoError(t, err)
	for _, m := range ms {
		assert.NotEqual(t, "partial-control", m.Params["kind"])
	}
}

// TestControlDuringIsTwiceTheMeanUnit: on an idle machine (every unit alike) the sample is
// the sum of one unit before and one after, the figure controls had when they were timed
// around the sync, so that files of both kinds stay comparable.
func TestControlDuringIsTwiceTheMeanUnit(t *testing.T) {
	stop := controlDuring(func() time.Duration { return 3 * time.Millisecond })
	assert.Equal(t, 6*time.Millisecond, stop())
}
