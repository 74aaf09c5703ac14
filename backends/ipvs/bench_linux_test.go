//go:build linux

package ipvs

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

// scaleState returns n ClusterIP service ports with two endpoints each.
func scaleState(n int) *backends.State {
	sps := make([]*backends.ServicePort, n)
	for i := range n {
		vip := netip.AddrFrom4([4]byte{172, 30, byte(i / 250), byte(i%250 + 1)})
		sps[i] = &backends.ServicePort{
			Name:      backends.ServicePortName{Namespace: "ns", Name: fmt.Sprintf("svc-%05d", i), Port: "p80", Protocol: backends.TCP},
			ClusterIP: vip, Port: 80,
			Endpoints: []backends.Endpoint{
				bt.EP(fmt.Sprintf("10.1.%d.1:8080", i%250)),
				bt.EP(fmt.Sprintf("10.1.%d.2:8080", i%250)),
			},
		}
	}
	return state(sps...)
}

func reportSync(b *testing.B, total, gen, apply time.Duration, res backends.SyncResult) {
	n := float64(b.N)
	b.ReportMetric(float64(total.Milliseconds())/n, "ms/sync")
	b.ReportMetric(float64(gen.Microseconds())/1000/n, "generate-ms/sync")
	b.ReportMetric(float64(apply.Milliseconds())/n, "apply-ms/sync")
	b.ReportMetric(float64(res.Rules), "rules")
	b.ReportMetric(float64(res.Bytes), "bytes")
}

// BenchmarkSyncFull measures a full sync into a clean node: virtual and real servers,
// kube-ipvs0 addresses, ipsets and the constant iptables ruleset.
func BenchmarkSyncFull(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			be, _ := kernelBackend(b, Options{})
			ctx := context.Background()
			st := scaleState(n)
			var gen, apply time.Duration
			var res backends.SyncResult
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				require.NoError(b, be.Cleanup(ctx))
				b.StartTimer()
				var err error
				res, err = be.Sync(ctx, st)
				require.NoError(b, err)
				require.True(b, res.Full)
				gen += res.Generate
				apply += res.Apply
			}
			reportSync(b, b.Elapsed(), gen, apply, res)
		})
	}
}

// BenchmarkSyncOneService measures a partial sync after one service port's endpoints
// changed, with n services installed.
func BenchmarkSyncOneService(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			be, _ := kernelBackend(b, Options{})
			ctx := context.Background()
			st := scaleState(n)
			_, err := be.Sync(ctx, st)
			require.NoError(b, err)
			sp := st.Services[n/2]
			two := sp.Endpoints
			three := append(append([]backends.Endpoint{}, two...), bt.EP("10.1.250.3:8080"))
			var gen, apply time.Duration
			var res backends.SyncResult
			b.ResetTimer()
			for i := range b.N {
				sp.Endpoints = two
				if i%2 == 0 {
					sp.Endpoints = three
				}
				res, err = be.Sync(ctx, st)
				require.NoError(b, err)
				require.False(b, res.Full)
				require.Equal(b, 1, res.ChangedServices)
				gen += res.Generate
				apply += res.Apply
			}
			reportSync(b, b.Elapsed(), gen, apply, res)
		})
	}
}
