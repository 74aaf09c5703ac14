//go:build linux

package nftables

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

// reportSync adds a sync's figures to b.
func reportSync(b *testing.B, res backends.SyncResult) {
	b.ReportMetric(res.Generate.Seconds(), "generate-s")
	b.ReportMetric(res.Apply.Seconds(), "apply-s")
	b.ReportMetric(float64(res.Rules), "rules")
	b.ReportMetric(float64(res.Bytes), "bytes")
}

// BenchmarkKernelFullSync is a full sync of services x endpoints into an empty
// namespace: 5,000 x 50 (250k endpoints) is the published EKS figure's size (goal: 30 s).
// Each iteration starts from a fresh namespace.
func BenchmarkKernelFullSync(b *testing.B) {
	for _, size := range []struct{ services, endpoints int }{{1000, 2}, {5000, 2}, {5000, 50}} {
		b.Run(fmt.Sprintf("services=%d/endpoints=%d", size.services, size.endpoints), func(b *testing.B) {
			s := bigState(size.services, size.endpoints)
			var last backends.SyncResult
			for b.Loop() {
				b.StopTimer()
				be, _ := kernelBackend(b)
				b.StartTimer()
				res, err := be.Sync(context.Background(), s)
				require.NoError(b, err)
				require.True(b, res.Full)
				last = res
			}
			reportSync(b, last)
		})
	}
}

// BenchmarkKernelResync is a forced full sync of services x 2 endpoints over the same
// ruleset already in the kernel: what the agent's periodic resync and the bench's
// "full sync" measurement cost (every chain exists, so all of it is rewritten in the
// main transaction).
func BenchmarkKernelResync(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d/endpoints=2", n), func(b *testing.B) {
			s := bigState(n, 2)
			be, _ := kernelBackend(b)
			ctx := context.Background()
			_, err := be.Sync(ctx, s)
			require.NoError(b, err)
			var last backends.SyncResult
			for b.Loop() {
				be.ForceFullSync()
				res, err := be.Sync(ctx, s)
				require.NoError(b, err)
				require.True(b, res.Full)
				last = res
			}
			reportSync(b, last)
		})
	}
}

// BenchmarkKernelIncrementalSync changes one service's endpoints at 20,000 services x 2
// endpoints (goal: 50 ms per sync, table check and nft included).
func BenchmarkKernelIncrementalSync(b *testing.B) {
	s := bigState(20000, 2)
	be, _ := kernelBackend(b)
	ctx := context.Background()
	t0 := time.Now()
	res, err := be.Sync(ctx, s)
	require.NoError(b, err)
	b.Logf("initial full sync of 20000x2: %v (generate %v, apply %v, %d rules, %d bytes)",
		time.Since(t0), res.Generate, res.Apply, res.Rules, res.Bytes)
	sp := s.Services[len(s.Services)/2]
	flip := []backends.Endpoint{bt.EP("10.200.0.1:8080"), bt.EP("10.200.0.2:8080")}
	var last backends.SyncResult
	for b.Loop() {
		sp.Endpoints, flip = flip, sp.Endpoints
		res, err := be.Sync(ctx, s)
		require.NoError(b, err)
		require.False(b, res.Full)
		last = res
	}
	reportSync(b, last)
}
