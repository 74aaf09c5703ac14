package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestValidateParsesOnce: validate reads a scenario's kind and loads it from one parse
// of the file (reading the kind from a parse of its own doubled the cost of a large
// file). Allocations, not seconds: validating a large scenario allocates well under twice
// what yaml.v3 alone allocates to parse it (a second parse alone is as much again).
func TestValidateParsesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("validates a 300 kB scenario")
	}
	var b strings.Builder
	b.WriteString("apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: big\ntopology: {nodes: 1, clients: 1}\nsteps:\n")
	for range 4000 {
		b.WriteString("- expect: {from: client-0, to: {ipPort: \"10.0.0.1:80\"}, expectation: dropped, timeout: 2s}\n")
	}
	path := filepath.Join(t.TempDir(), "big.scenario.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))

	parse := testing.AllocsPerRun(1, func() {
		var n yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(b.String()), &n))
	})
	var err error
	validate := testing.AllocsPerRun(1, func() {
		err = validateFile(onceWriter{w: io.Discard, seen: map[string]bool{}}, path, nil)
	})
	require.NoError(t, err)
	t.Logf("%.0f allocations to validate, %.0f to parse, ratio %.2f", validate, parse, validate/parse)
	require.Less(t, validate, 1.6*parse, "validate allocates as if it parsed the file twice")
}
