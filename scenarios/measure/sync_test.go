//go:build linux

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
)

// fakeProxy appends the records that each change produces, as a proxy's loop would.
type fakeProxy struct {
	recs []agent.SyncRecord
	// script[i] are the records the i-th change produces.
	script [][]agent.SyncRecord
	calls  int
}

func (f *fakeProxy) Node() string                { return "node-0" }
func (f *fakeProxy) Records() []agent.SyncRecord { return f.recs }
func (f *fakeProxy) Metrics() agent.Metrics      { return agent.Metrics{} }
func (f *fakeProxy) ForceSync(context.Context, bool) (agent.SyncRecord, error) {
	return agent.SyncRecord{}, errors.New("not used")
}

func (f *fakeProxy) change(context.Context, int) error {
	if f.calls < len(f.script) {
		f.recs = append(f.recs, f.script[f.calls]...)
	}
	f.calls++
	return nil
}

func rec(d time.Duration, full, periodic bool) agent.SyncRecord {
	t0 := time.Unix(1000, 0)
	return agent.SyncRecord{Start: t0, End: t0.Add(d), Periodic: periodic, Result: backends.SyncResult{Full: full}}
}

// TestSyncPartialNeverTakesAFullSync: the 210 s "partial" sync of issue 22 was a full sync
// that happened to be the first record after the change. A full record must be kept
// apart (kind unplanned-full, with its cause), and the partial sample is the partial sync.
func TestSyncPartialNeverTakesAFullSync(t *testing.T) {
	tests := []struct {
		name        string
		script      [][]agent.SyncRecord
		wantPartial []float64
		wantFull    map[string][]float64
		wantErr     string
	}{
		{name: "partials only", script: [][]agent.SyncRecord{{rec(time.Second, false, false)}, {rec(2*time.Second, false, false)}},
			wantPartial: []float64{1, 2}},
		{name: "periodic full before the partial", script: [][]agent.SyncRecord{
			{rec(210*time.Second, true, true), rec(time.Second, false, false)}, {rec(2*time.Second, false, false)}},
			wantPartial: []float64{1, 2}, wantFull: map[string][]float64{"periodic": {210}}},
		{name: "change carried by a full sync is made again", script: [][]agent.SyncRecord{
			{rec(100*time.Second, true, false)}, {rec(time.Second, false, false)}, {rec(3*time.Second, false, false)}},
			wantPartial: []float64{1, 3}, wantFull: map[string][]float64{"backend": {100}}},
		{name: "only full syncs", script: [][]agent.SyncRecord{
			{rec(time.Second, true, false)}, {rec(time.Second, true, false)}, {rec(time.Second, true, false)}},
			wantErr: "full syncs only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProxy{script: tt.script}
			ms, err := Sync(t.Context(), p, false, 2, p.change, nil)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			gotFull := map[string][]float64{}
			var gotPartial []float64
			for _, m := range ms {
				if m.Name != MeasureSync {
					continue
				}
				switch m.Params["kind"] {
				case "partial":
					gotPartial = m.Samples
				case SyncKindUnplannedFull:
					gotFull[m.Params["cause"]] = m.Samples
				default:
					t.Fatalf("unexpected kind %q", m.Params["kind"])
				}
			}
			assert.Equal(t, tt.wantPartial, gotPartial)
			if tt.wantFull == nil {
				tt.wantFull = map[string][]float64{}
			}
			assert.Equal(t, tt.wantFull, gotFull)
		})
	}
}
