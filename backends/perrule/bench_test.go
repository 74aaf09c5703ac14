//go:build linux

package perrule

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/backends/iptables"
	"kpbench.dev/kpbench/internal/testutil"
)

func benchState(n int) *backends.State {
	st := &backends.State{NodeName: "node-1", ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8")}
	for i := range n {
		st.Services = append(st.Services, &backends.ServicePort{
			Name:      backends.ServicePortName{Namespace: "bench", Name: "svc-" + strconv.Itoa(i), Port: "http", Protocol: backends.TCP},
			ClusterIP: netip.AddrFrom4([4]byte{172, 30, byte(i >> 8), byte(i)}), Port: 80,
			Endpoints: []backends.Endpoint{
				{IP: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 8080, Ready: true, Serving: true},
				{IP: netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), Port: 8080, Ready: true, Serving: true},
			},
		})
	}
	st.SortServices()
	return st
}

// BenchmarkPerRuleAdd loads N services (KPBENCH_BENCH_SERVICES, default 200) rule by rule,
// then adds one more service; it reports the median single-rule add latency at the start
// and at the end of the load, and for the final one-service change.
func BenchmarkPerRuleAdd(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("KPBENCH_BENCH_SERVICES")); err == nil && v > 0 {
		n = v
	}
	for _, f := range []iptables.Flavor{iptables.FlavorLegacy, iptables.FlavorNFT} {
		b.Run(string(f), func(b *testing.B) {
			testutil.RequireRoot(b)
			bin, _, save := f.Binaries()
			testutil.RequireBinary(b, bin, save)
			for b.Loop() {
				_, path := testutil.NewNetNS(b)
				be := New(Options{NodeName: "bench", NetNSPath: path, Flavor: f})
				_, err := be.Sync(context.Background(), benchState(n))
				require.NoError(b, err)
				load := be.RuleTimings()
				_, err = be.Sync(context.Background(), benchState(n+1))
				require.NoError(b, err)
				one := be.RuleTimings()
				k := len(load) / 10
				b.ReportMetric(median(load[:k]).Seconds()*1e3, "first10%-add-ms")
				b.ReportMetric(median(load[len(load)-k:]).Seconds()*1e3, "last10%-add-ms")
				b.ReportMetric(median(one).Seconds()*1e3, "change-add-ms")
				b.ReportMetric(float64(len(load)), "rules-loaded")
				b.ReportMetric(float64(len(one)), "rules-changed")
			}
		})
	}
}

func median(ts []RuleTiming) time.Duration {
	d := make([]time.Duration, len(ts))
	for i, t := range ts {
		d[i] = t.Duration
	}
	slices.Sort(d)
	if len(d) == 0 {
		return 0
	}
	return d[len(d)/2]
}
