package scenarios

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConformanceStepFields covers the fields the conformance suite added: wait.duration,
// expect.sourcePort and expect.interval, knownFailures.
func TestConformanceStepFields(t *testing.T) {
	base := filepath.Join("examples")
	tests := []struct {
		name    string
		src     string
		wantErr string
	}{
		{"wait duration", scenario("- wait: {duration: 2s}"), ""},
		{"wait both", scenario("- wait: {synced: true, duration: 2s}"), "not both"},
		{"wait duration with timeout", scenario("- wait: {duration: 2s, timeout: 5s}"), "fixed duration has no timeout"},
		{"wait too long", scenario("- wait: {duration: 10m}"), "at most 5m0s"},
		{"wait negative", scenario("- wait: {duration: -1s}"), "positive duration"},
		{"expect source port and interval", scenario("- expect: {from: client-0, to: {service: multi, port: b}, expectation: reachable, sourcePort: 40000, interval: 1500ms, count: 3}"), ""},
		{"expect source port out of range", scenario("- expect: {from: client-0, to: {service: multi, port: b}, expectation: reachable, sourcePort: 70000}"), "sourcePort"},
		{"expect interval too long", scenario("- expect: {from: client-0, to: {service: multi, port: b}, expectation: reachable, interval: 11s}"), "at most 10s"},
		{"known failure", scenario("- wait: {synced: true}", "  knownFailure: {reason: source IP is lost, issue: kubernetes/kubernetes#1, backends: [userspace]}"), ""},
		{"known failure without backends", scenario("- wait: {synced: true}", "  knownFailure: {reason: source IP is lost}"), "knownFailure.backends"},
		{"scenario-wide known failures", scenario("- wait: {synced: true}") + "knownFailures: {userspace: source IP is lost}\n", "on the step that fails"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseScenario("s.yaml", []byte(tt.src), base)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if w, ok := s.Steps[0].Action.(*WaitStep); ok && w.Duration != nil {
				assert.Equal(t, 2*time.Second, w.Duration.Duration)
				assert.Nil(t, w.Timeout, "a fixed wait gets no default timeout")
			}
			if e, ok := s.Steps[0].Action.(*ExpectStep); ok {
				assert.Equal(t, 40000, e.SourcePort)
				assert.Equal(t, 1500*time.Millisecond, e.Interval.Duration)
			}
		})
	}
}

// afterProbedChurn is a scenario of steps that follow a mixed churn with its prober.
func afterProbedChurn(steps ...string) string {
	return scenario(append([]string{
		"- churn: {pattern: add, services: 100, allAtOnce: true}",
		"- churn: {pattern: mixed, services: 100, rate: 50, duration: 10s, probe: {workers: 4, interval: 5ms, timeout: 1s, deadline: 20s}}",
	}, steps...)...)
}

// TestChurnHealthAndLimitFields covers the fields of the mixed churn with its prober, the
// httpStatus expectation of health-check node ports, and measure limits.
func TestChurnHealthAndLimitFields(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		wantErr string
	}{
		{"mixed churn with a probe", afterProbedChurn(), ""},
		{"mixed churn with nothing to change", scenario("- churn: {pattern: mixed, services: 100, rate: 50, duration: 10s, probe: {workers: 4}}"), "no generated Services exist"},
		{"mixed churn without duration", scenario("- churn: {pattern: mixed, services: 100, rate: 50}"), "how long the mixed pattern runs"},
		{"mixed churn all at once", scenario("- churn: {pattern: mixed, services: 100, allAtOnce: true, duration: 10s}"), "the mixed pattern runs at a rate"},
		{"probe on the add pattern", scenario("- churn: {pattern: add, services: 100, rate: 50, probe: {}}"), "only the mixed pattern runs a prober"},
		{"probe from a client", scenario("- churn: {pattern: mixed, services: 10, rate: 5, duration: 1s, probe: {node: client-0}}"), "must be node-N"},
		{"probe with too many workers", scenario("- churn: {pattern: mixed, services: 10, rate: 5, duration: 1s, probe: {workers: 65}}"), "1-64"},
		{"probe timeout too long", scenario("- churn: {pattern: mixed, services: 10, rate: 5, duration: 1s, probe: {timeout: 6s}}"), "at most 5s"},
		{"unknown pattern", scenario("- churn: {pattern: shuffle, services: 10, rate: 5}"), `"mixed"`},
		{"limits", afterProbedChurn("- measure: {name: churn, limits: {churn-misroutes: 0, churn-false-refusals: 0}}"), ""},
		{"negative limit", afterProbedChurn("- measure: {name: churn, limits: {churn-misroutes: -1}}"), "limits[churn-misroutes]"},
		{"limit with a bad name", afterProbedChurn("- measure: {name: churn, limits: {'9x': 1}}"), "must be a measurement name"},
		{"httpStatus without status", scenario("- expect: {from: client-0, to: {service: multi, port: a, address: healthCheckNodePort}, expectation: httpStatus}"), "must be an HTTP status"},
		{"httpStatus on a Service without a health-check node port", scenario("- expect: {from: client-0, to: {service: multi, port: a, address: healthCheckNodePort}, expectation: httpStatus, status: 200}"), "has no health-check node port"},
		{"httpStatus to a clusterIP", scenario("- expect: {from: client-0, to: {service: multi, port: a}, expectation: httpStatus, status: 200}"), "httpStatus probes a Service's healthCheckNodePort"},
		{"status on reachable", scenario("- expect: {from: client-0, to: {service: multi, port: a}, expectation: reachable, status: 200}"), "only an httpStatus expectation has a status"},
		{"path on reachable", scenario("- expect: {from: client-0, to: {service: multi, port: a}, expectation: reachable, path: /x}"), "only an httpStatus expectation has a path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScenario("s.yaml", []byte(tt.src), "examples")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
}

// TestShippedChurnScenariosLoad: the churn scenarios load and ask for the correctness
// limits a correct proxy meets under churn (0 misroutes, 0 false refusals).
func TestShippedChurnScenariosLoad(t *testing.T) {
	for _, f := range []string{"churn.yaml", "churn-small.yaml", "vm-ladder.yaml"} {
		t.Run(f, func(t *testing.T) {
			s, err := Load(f)
			require.NoError(t, err)
			if f == "vm-ladder.yaml" {
				return
			}
			var limits map[string]float64
			for _, st := range s.Steps {
				if m, ok := st.Action.(*MeasureStep); ok && m.Name == "churn" {
					limits = m.Limits
				}
			}
			assert.Equal(t, map[string]float64{"churn-misroutes": 0, "churn-false-refusals": 0}, limits)
		})
	}
}
