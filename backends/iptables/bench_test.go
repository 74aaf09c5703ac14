//go:build linux

package iptables

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kpbench.dev/kpbench/backends"
	"kpbench.dev/kpbench/internal/netns"
	"kpbench.dev/kpbench/internal/testutil"
)

// bigState returns n service ports with 2 ready endpoints each.
func bigState(n int) *backends.State {
	st := &backends.State{
		NodeName:    "node-1",
		NodeIPs:     []netip.Addr{netip.MustParseAddr("192.168.0.1")},
		ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8"),
	}
	for i := range n {
		ip := netip.AddrFrom4([4]byte{172, 30, byte(i >> 8), byte(i)})
		sp := &backends.ServicePort{
			Name:      backends.ServicePortName{Namespace: "bench", Name: "svc-" + itoa(i), Port: "http", Protocol: backends.TCP},
			ClusterIP: ip, Port: 80,
		}
		for j := range 2 {
			sp.Endpoints = append(sp.Endpoints, backends.Endpoint{
				IP:   netip.AddrFrom4([4]byte{10, byte(j + 1), byte(i >> 8), byte(i)}),
				Port: 8080, Ready: true, Serving: true,
			})
		}
		st.Services = append(st.Services, sp)
	}
	st.SortServices()
	return st
}

// cpuTime is the process's user+system time: wall time lies when other work shares the
// machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func itoa(i int) string {
	var b [20]byte
	return string(appendInt(b[:0], i))
}

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// BenchmarkGenerate20k measures generation of a full sync for 20,000 services x 2
// endpoints (goal: <= 150 ms, <= 200 MB heap).
func BenchmarkGenerate20k(b *testing.B) {
	st := bigState(20000)
	g := NewGenerator(DefaultMasqueradeBit)
	var buf bytes.Buffer
	b.ReportAllocs()
	var res Result
	cpu0 := cpuTime()
	for b.Loop() {
		buf.Reset()
		res = g.Generate(&buf, Request{State: st})
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(res.Rules), "rules")
	b.ReportMetric(float64(res.Bytes), "input-bytes")
	b.ReportMetric(float64(ms.HeapInuse)/1e6, "heap-inuse-MB")
}

// BenchmarkSyncFull compares one full Backend.Sync of N services x 2 endpoints (N from
// KPBENCH_BENCH_SERVICES, default 20,000) into a fresh namespace with a bare
// `iptables-restore --noflush --counters` of the same text into another fresh namespace
// (goal: ratio <= 1.15). Beware: iptables-nft-restore --noflush grows superlinearly with
// the number of chains (about 15 minutes at 20k services on 1.8.9); the nft-hint variant
// runs the backend with WholeTableCache (its bare restore stays kube-proxy's).
func BenchmarkSyncFull(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("KPBENCH_BENCH_SERVICES")); err == nil && v > 0 {
		n = v
	}
	for _, v := range []struct {
		name string
		f    Flavor
		hint bool
	}{{"legacy", FlavorLegacy, false}, {"nft", FlavorNFT, false}, {"nft-hint", FlavorNFT, true}} {
		f := v.f
		b.Run(v.name, func(b *testing.B) {
			requireFlavour(b, f)
			st := bigState(n)
			var buf bytes.Buffer
			NewGenerator(DefaultMasqueradeBit).Generate(&buf, Request{State: st, Installed: map[string]struct{}{}})
			_, restore, _ := f.Binaries()
			var backend, bare, gen, apply, applyCPU, bareCPU time.Duration
			for b.Loop() {
				_, p1 := testutil.NewNetNS(b)
				be := New(Options{NodeName: "bench", NetNSPath: p1, Flavor: f, LockFile: filepath.Join(b.TempDir(), "lock"), WholeTableCache: v.hint})
				start := time.Now()
				res, err := be.Sync(context.Background(), st)
				backend += time.Since(start)
				require.NoError(b, err)
				require.True(b, res.Full)
				gen += res.Generate
				apply += res.Apply
				applyCPU += res.ApplyCPU

				_, p2 := testutil.NewNetNS(b)
				start = time.Now()
				out, err := netns.Tools{NSPath: p2}.Exec(context.Background(), netns.Command{
					Path: restore, Args: []string{"-w", "--noflush", "--counters"}, Stdin: buf.Bytes(),
					Env: []string{"XTABLES_LOCKFILE=" + filepath.Join(b.TempDir(), "lock")}})
				bare += time.Since(start)
				bareCPU += out.CPU
				require.NoError(b, err)
			}
			n := float64(b.N)
			b.ReportMetric(backend.Seconds()/n, "backend-s/op")
			b.ReportMetric(bare.Seconds()/n, "bare-restore-s/op")
			b.ReportMetric(backend.Seconds()/bare.Seconds(), "ratio")
			b.ReportMetric(gen.Seconds()/n, "generate-s/op")
			b.ReportMetric(apply.Seconds()/n, "apply-s/op")
			b.ReportMetric(applyCPU.Seconds()/n, "apply-cpu-s/op")
			b.ReportMetric(bareCPU.Seconds()/n, "bare-cpu-s/op")
		})
	}
}
