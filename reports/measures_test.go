package reports

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMeasures: every measurement is declared once, and its declarations describe it.
func TestMeasures(t *testing.T) {
	var names []string
	for _, m := range Measures() {
		assert.NotContains(t, names, m.Name, "declared twice")
		names = append(names, m.Name)
		if m.Name == MeasureThroughput {
			assert.Empty(t, m.Metrics, "throughput is read in older files only")
		} else {
			assert.NotEmpty(t, m.Metrics, "%s: what runs record today", m.Name)
		}
		for _, d := range slices.Concat(m.Metrics, m.Legacy) {
			assert.Equal(t, m.Name, d.Measurement, "%s declares another name", m.Name)
			assert.NotEmpty(t, d.Unit, "%s: a unit", m.Name)
			if d.Gated {
				assert.NotEmpty(t, d.Test, "%s: a gated metric names its test", m.Name)
				assert.Positive(t, d.MinSamples, "%s: a gated metric says how many samples a verdict needs", m.Name)
			}
		}
	}
	assert.Panics(t, func() { MetricsOf("no-such-measurement") })
	assert.Len(t, MetricsOf(MeasureSync, MeasureLookup), 6, "sync's four declarations and lookup's two, in order")
}

// TestMeasurementNamesDefinedHere: no package but reports defines a measurement name (a
// constant, an alias of one, or a literal name in a Measurement), so that every name is
// defined once.
func TestMeasurementNamesDefinedHere(t *testing.T) {
	var known []string
	for _, m := range Measures() {
		known = append(known, regexp.QuoteMeta(m.Name))
	}
	patterns := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\s*(const\s+)?Measure\w*\s*(string\s*)?=`),
		regexp.MustCompile(`Measurement\{Name:\s*"(` + strings.Join(known, "|") + `)"`),
	}
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "reports", "testdata", "vendor", ".git":
				if path != root {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, re := range patterns {
			if loc := re.Find(data); loc != nil {
				t.Errorf("%s defines a measurement name outside reports: %q", path, loc)
			}
		}
		return nil
	})
	require.NoError(t, err)
}
