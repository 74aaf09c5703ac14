//go:build linux

package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/internal/netns"
)

// TestFaultTamperingRepairedByAgent: a running agent (SyncPeriod 1 min, CheckPeriod
// 200ms) programs a node; someone then removes its rules behind its back. The agent's state
// check notices, the sync it forces is full and carries the cause, and the kernel is back
// to exactly what it was, well within one CheckPeriod plus a sync (the default CheckPeriod
// is SyncPeriod, so in a real run: within one syncPeriod).
func TestFaultTamperingRepairedByAgent(t *testing.T) {
	const checkPeriod = 200 * time.Millisecond
	tampers := []struct {
		backend, name string
		cmd           []string
	}{
		{"iptables", "flush nat", []string{"iptables-nft", "-w", "-t", "nat", "-F"}},
		{"iptables-legacy", "flush nat", []string{"iptables-legacy", "-w", "-t", "nat", "-F"}},
		{"nftables", "delete table", []string{"nft", "delete", "table", "ip", "kube-proxy"}},
		{"nftables", "flush table", []string{"nft", "flush", "table", "ip", "kube-proxy"}},
	}
	for _, tt := range tampers {
		t.Run(tt.backend+"/"+tt.name, func(t *testing.T) {
			requireBackend(t, tt.backend)
			node := newNodeAgent(t, tt.backend, "", checkPeriod)
			observeAll(node.Agent, objectsNew())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- node.Run(ctx) }()
			defer func() { cancel(); assert.NoError(t, <-done) }()
			require.NoError(t, node.WaitSynced(ctx, 16))
			want := kernelState(t, tt.backend, node.path)
			synced := len(node.Records())

			_, err := netns.Exec(ctx, node.path, netns.Command{Path: tt.cmd[0], Args: tt.cmd[1:]})
			require.NoError(t, err)
			tampered := time.Now()
			require.NotEqual(t, want, kernelState(t, tt.backend, node.path), "the tampering changed nothing")

			// Poll the agent's records, with a deadline, for the repairing sync.
			var repair SyncRecord
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for repair.StateLost == nil || repair.End.IsZero() {
				select {
				case <-ctx.Done():
					require.FailNow(t, "the agent did not repair the node", "records: %+v", node.Records())
				case <-tick.C:
				}
				for _, r := range node.Records()[synced:] {
					if r.StateLost != nil {
						repair = r
					}
				}
			}
			took := repair.End.Sub(tampered)
			t.Logf("detected by %q; repaired %v after the tampering (sync %v)", repair.StateLost, took, repair.Duration())
			require.NoError(t, repair.Err)
			assert.True(t, repair.Result.Full, "the repairing sync is full")
			assert.False(t, repair.Periodic)
			assert.Less(t, took, checkPeriod+repair.Duration()+time.Second, "repaired within one check period and a sync (1s slack for a loaded machine)")
			assert.Equal(t, 1, node.Metrics().StateLost)
			assert.Equal(t, want, kernelState(t, tt.backend, node.path), "the kernel is back to the state before the tampering")
		})
	}
}
