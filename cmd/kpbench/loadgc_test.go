package main

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWhileLoading: the collector's target is raised for loading and put back after;
// left alone when the user set GOGC.
func TestWhileLoading(t *testing.T) {
	for _, tt := range []struct {
		name   string
		gogc   string // "" for unset
		during int
	}{
		{"GOGC unset", "", loadGCPercent},
		{"GOGC set", "150", 150},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.gogc != "" {
				t.Setenv("GOGC", tt.gogc)
			} else if v, set := os.LookupEnv("GOGC"); set {
				t.Setenv("GOGC", v) // restored after the test
				os.Unsetenv("GOGC")
			}
			outside := 150
			old := debug.SetGCPercent(outside)
			t.Cleanup(func() { debug.SetGCPercent(old) })

			restore := whileLoading()
			during := gcPercent()
			restore()
			assert.Equal(t, tt.during, during, "while loading")
			assert.Equal(t, outside, gcPercent(), "after loading")
		})
	}
}

// gcPercent reads the collector's target (SetGCPercent is the only reader: set and put
// back).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
