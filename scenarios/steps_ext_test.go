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
		{"known failures", scenario("- wait: {synced: true}") + "knownFailures: {userspace: source IP is lost}\n", ""},
		{"known failure without reason", scenario("- wait: {synced: true}") + "knownFailures: {userspace: \"\"}\n", "knownFailures[userspace]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseScenario("s.yaml", []byte(tt.src), base)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if w := s.Steps[0].Wait; w != nil && w.Duration != nil {
				assert.Equal(t, 2*time.Second, w.Duration.Duration)
				assert.Nil(t, w.Timeout, "a fixed wait gets no default timeout")
			}
			if e := s.Steps[0].Expect; e != nil {
				assert.Equal(t, 40000, e.SourcePort)
				assert.Equal(t, 1500*time.Millisecond, e.Interval.Duration)
			}
		})
	}
}
