package nftables

import (
	"fmt"
	"testing"

	"kpbench.dev/kpbench/backends"
	bt "kpbench.dev/kpbench/backends/backendstest"
)

// BenchmarkGenerate measures building the full transaction (no kernel, no root) for
// services x 2 endpoints: the Generate part of a full sync.
func BenchmarkGenerate(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("services=%d/endpoints=2", n), func(b *testing.B) {
			s := bigState(n, 2)
			be, _ := newFake()
			cfg := configOf(s)
			b.ReportAllocs()
			for b.Loop() {
				w := &writer{tx: be.nft.NewTransaction()}
				be.writeFull(w, cfg, s, nil, nil)
			}
		})
	}
}

// BenchmarkGenerateIncremental measures the Generate part of an incremental sync that
// changes one service's endpoints, at 20,000 services x 2 endpoints.
func BenchmarkGenerateIncremental(b *testing.B) {
	s := bigState(20000, 2)
	be, _ := newFake()
	cfg := configOf(s)
	// Pretend a full sync succeeded: record its state without running the fake
	// (the fake copies the whole table at every Run).
	w := &writer{tx: be.nft.NewTransaction()}
	ps, _ := be.writeFull(w, cfg, s, nil, nil)
	be.commit(ps, cfg)
	sp := s.Services[len(s.Services)/2]
	flip := []backends.Endpoint{bt.EP("10.200.0.1:8080"), bt.EP("10.200.0.2:8080")}
	b.ReportAllocs()
	for b.Loop() {
		sp.Endpoints, flip = flip, sp.Endpoints
		w := &writer{tx: be.nft.NewTransaction()}
		be.commit(be.writeIncremental(w, cfg, s), cfg)
	}
}
