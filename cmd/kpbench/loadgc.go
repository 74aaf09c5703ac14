package main

import (
	"os"
	"runtime/debug"

	"kpbench.dev/kpbench/scenarios"
)

// loadGCPercent is the garbage collector's target while a scenario loads. Loading builds
// a tree of YAML nodes that stays live until the scenario is decoded (a 1 MB file: 650k
// nodes, 45 MB), so each collection while the heap grows from its start-up size marks a
// tree that cannot be freed. At 400 instead of 100 a whole `kpbench validate` of a 1 MB
// scenario took 87 ms instead of 101 (median of 21, idle) and peaked 2 MB higher.
const loadGCPercent = 400

// whileLoading sets the collector's target for loading and returns what restores it: the
// setting is the process's, so it is changed only around loading, in the command, never
// while a lab runs (whose memory the bench measures), and not when the user set GOGC.
func whileLoading() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(loadGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// loadScenario loads a scenario file under whileLoading.
func loadScenario(path string) (*scenarios.Scenario, error) {
	defer whileLoading()()
	return scenarios.Load(path)
}
