//go:build linux

package scenarios

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/reports"
)

// TestRecordRefusesEmptySamples: a measurement without samples is an error naming it and
// never reaches the results; one no registered metric declares is refused too; the
// others are recorded with their declaration.
func TestRecordRefusesEmptySamples(t *testing.T) {
	res := &reports.Results{}
	s := &Session{Backend: "iptables", registry: DefaultRegistry(), results: res}
	err := s.Record(
		reports.Measurement{Name: reports.MeasureSync, Params: map[string]string{"kind": "full"}, Unit: reports.UnitSeconds},
		reports.Measurement{Name: reports.MeasureSync, Params: map[string]string{"kind": "partial"}, Unit: reports.UnitSeconds, Samples: []float64{0.5}},
		reports.Measurement{Name: "made-up", Unit: reports.UnitCount, Samples: []float64{1}},
	)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sync (kind=full) recorded no sample")
	assert.Contains(t, err.Error(), "made-up: no registered measurement declares this metric")
	require.Len(t, res.Runs, 1)
	require.Len(t, res.Runs[0].Measurements, 1, "only the measurement with samples is recorded")
	assert.Equal(t, "partial", res.Runs[0].Measurements[0].Params["kind"])
	require.Len(t, res.Metrics, 1)
	assert.Equal(t, map[string]string{"kind": "partial"}, res.Metrics[0].Match)
}

// TestResultsAddOnlyThroughRecord: in this package, only Session.Record adds
// measurements to results (so none can arrive without samples or a declaration).
func TestResultsAddOnlyThroughRecord(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok {
				return true
			}
			inRecord := fn.Name.Name == "Record" && fn.Recv != nil
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Add" {
					if recv, ok := sel.X.(*ast.SelectorExpr); ok && recv.Sel.Name == "results" && !inRecord {
						t.Errorf("%s: %s adds to the results outside Session.Record", fset.Position(call.Pos()), fn.Name.Name)
					}
				}
				return true
			})
			return false
		})
	}
}

// TestRegistryDeclaresWhatReportsDraw: every measurement name the reports know is
// declared by a registered measurement, and registering a name twice is refused.
func TestRegistryDeclaresWhatReportsDraw(t *testing.T) {
	reg := DefaultRegistry()
	declared := map[string]bool{}
	for _, m := range reg.Metrics() {
		declared[m.Measurement] = true
		assert.NotEmpty(t, m.Unit, "%s: a unit", m.Measurement)
		if m.Gated {
			assert.NotEmpty(t, m.Test, "%s: a gated metric names its test", m.Measurement)
			assert.Positive(t, m.MinSamples, "%s: a gated metric says how many samples a verdict needs", m.Measurement)
		}
	}
	for _, name := range []string{reports.MeasureSync, reports.MeasureLookup, reports.MeasureDistribution, reports.MeasureRules,
		reports.MeasureProgrammingLatency, reports.MeasurePerRule, reports.MeasureThroughputConnections,
		reports.MeasureThroughputRequests, reports.MeasureThroughputLatency, reports.MeasureControlPlaneStartup} {
		assert.True(t, declared[name], "%s is declared", name)
	}
	assert.Panics(t, func() { reg.AddMeasurement(mustMeasurement(t, "sync")) })
	assert.Panics(t, func() { reg.AddStep(mustStep(t, "wait")) })
}

// TestLineProgress: today's one line per step goes through the progress hook.
func TestLineProgress(t *testing.T) {
	var b bytes.Buffer
	p := LineProgress{W: &b}
	ev := StepEvent{Backend: "nftables", Index: 2, Total: 5, Label: "full-sync-1k"}
	p.StepStarted(ev)
	p.StepAdvanced(ev, 1, 3)
	p.StepFinished(ev, 1500*time.Millisecond, nil)
	p.StepFinished(ev, time.Second, errors.New("boom"))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 2)
	assert.Regexp(t, `^\[\d\d:\d\d:\d\d nftables\] 2/5 full-sync-1k: 1.50s$`, lines[0])
	assert.True(t, strings.HasSuffix(lines[1], "2/5 full-sync-1k: 1.00s FAILED: boom"))
}
