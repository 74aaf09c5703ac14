package all

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
)

func TestABVariantsValidate(t *testing.T) {
	for ref, ok := range map[string]bool{
		"iptables@same": true, "iptables@slow-25": true, "iptables@slow-1000": true,
		"iptables@slow-0": false, "iptables@slow-x": false, "iptables@slow-": false, "iptables@other": false,
	} {
		assert.Equal(t, ok, Validate(ref) == nil, "%s: %v", ref, Validate(ref))
	}
}

// sleeper syncs in a fixed time.
type sleeper struct{ d time.Duration }

func (s sleeper) Name() string                  { return "sleeper" }
func (s sleeper) Cleanup(context.Context) error { return nil }
func (s sleeper) Sync(context.Context, *backends.State) (backends.SyncResult, error) {
	time.Sleep(s.d) // the inner sync's own work, not synchronisation
	return backends.SyncResult{Apply: s.d}, nil
}

func TestSlowedSyncTakesTheShareLonger(t *testing.T) {
	b := &slowed{Backend: sleeper{20 * time.Millisecond}, name: "sleeper@slow-50", slowdown: 0.5}
	start := time.Now()
	res, err := b.Sync(t.Context(), nil)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	assert.GreaterOrEqual(t, res.Apply, 30*time.Millisecond)
	assert.Equal(t, sleeper{20 * time.Millisecond}, b.Unwrap())
}
