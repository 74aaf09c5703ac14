# kpbench — a test bench for Kubernetes Service proxying.
#
#   make bench   the main job: installs what it needs, runs the default benchmark, writes the report
#   make test    the whole test suite (privileged tests need root; CI requires them)
#   make build   ./bin/kpbench

GO        ?= go
BIN       := bin/kpbench
OUT       ?= out/$(shell date -u +%Y%m%dT%H%M%SZ)
TEST_FLAGS ?= -count=1 -timeout 25m
FUZZTIME  ?= 10m
COMMIT    := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X kpbench.dev/kpbench/internal/version.Commit=$(COMMIT)

.PHONY: all deps test-deps vm-deps build test test-vm test-conformance test-full lint fmt bench scale soak clean fuzz upstream vm-ladder

# The conformance cases make test runs: every case on every backend, but kube-proxy-ipvs,
# whose control plane under the microVM's emulation takes 3-8 min a case (about 40 min for
# all 19): it runs two (docs/ci.md, "What make test covers", says which and why); make
# test-full runs all of them.
CI_CASES                 ?= *
CI_KUBE_PROXY_IPVS_CASES ?= nodeport,session-affinity-clusterip
CONFORM_OUT         ?= out/test-conformance
E2E_OUT             ?= out/test-e2e

all: build

## deps: install the Debian packages the bench runs: iptables, nftables, ipset, conntrack,
## iproute2, ipvsadm, curl (idempotent; what make bench needs, nothing more)
deps:
	@bash hack/install-deps.sh bench

## vm-deps: deps, and what the microVM needs (qemu, busybox, cpio, kmod, xz, zstd, binutils)
vm-deps:
	@bash hack/install-deps.sh bench vm

## test-deps: everything the tests need: deps, vm-deps, chromium (report screenshots), strace
test-deps:
	@bash hack/install-deps.sh bench vm test

## build: the kpbench binary at ./bin/kpbench
build:
	@mkdir -p bin
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kpbench

## test: vet, staticcheck and every test (privileged ones skip unless root), then the
## IPVS tests inside the microVM (this kernel has no IPVS), then conformance on every
## backend that runs here (make test-conformance). Builds the upstream reference
## binaries first (make upstream; its build times: docs/upstream.md) so that the tests
## against kube-proxy itself run too, and upstream's 15 [sig-network] Services Conformance
## tests against `cluster up` on nftables (make test-e2e).
test: test-deps build lint upstream tools-matrix
	$(GO) test $(TEST_FLAGS) ./...
	$(MAKE) fuzz FUZZTIME=10s
	$(MAKE) test-vm
	$(MAKE) test-conformance
	$(MAKE) test-e2e

.PHONY: test-e2e
## test-e2e: upstream's [sig-network] Services [Conformance] tests (e2e.test v1.37.2, built by
## make e2e-build) against a 3-node `kpbench cluster up` on kube-proxy nftables; fails on any
## failed or skipped one (docs/e2e.md)
test-e2e: build e2e-build
	./$(BIN) e2e --proxy nftables --focus '\[sig-network\] Services.*\[Conformance\]' --require-all --quiet --out $(E2E_OUT)

## test-conformance: the conformance matrix where go test does not run it (its
## TestSuitePasses covers iptables and nftables, all cases): iptables-legacy, userspace,
## kube-proxy-iptables and kube-proxy-nftables (the reference, from make upstream) natively,
## ipvs in the microVM, on CI_CASES (all); kube-proxy-ipvs in the microVM on
## CI_KUBE_PROXY_IPVS_CASES. A backend that cannot run here fails it (conform without
## --allow-skip). Its time here: docs/ci.md, "What make test covers".
test-conformance: vm-deps build upstream
	./$(BIN) conform --backend iptables-legacy,userspace --cases '$(CI_CASES)' --out $(CONFORM_OUT)/native
	./$(BIN) conform --backend kube-proxy-iptables,kube-proxy-nftables --cases '$(CI_CASES)' --out $(CONFORM_OUT)/kube-proxy
	./$(BIN) vm run --timeout 40m -- conform --backend ipvs --cases '$(CI_CASES)' --out $(CONFORM_OUT)/ipvs
	./$(BIN) vm run --timeout 40m --mem 3G -- conform --backend kube-proxy-ipvs --cases $(CI_KUBE_PROXY_IPVS_CASES) --out $(CONFORM_OUT)/kube-proxy-ipvs

## test-full: make test, then the whole conformance matrix: every case on every backend
## that runs natively (the kube-proxy reference included) and on ipvs and kube-proxy-ipvs
## in the microVM (kube-proxy-ipvs under TCG waits minutes per sync, hence the VM's 2 h
## bound; times here: docs/ci.md, "What make test covers")
test-full: test
	./$(BIN) conform --backend iptables,iptables-legacy,nftables,userspace,kube-proxy-iptables,kube-proxy-nftables --out $(CONFORM_OUT)/full-native
	./$(BIN) vm run --timeout 2h -- conform --backend ipvs,kube-proxy-ipvs --out $(CONFORM_OUT)/full-vm

## fuzz: each fuzz target for FUZZTIME (default 10m; make test runs them 10s each).
## Each minimizes a new input for at most 100 runs: Go's default (60 s per input) holds
## the worker, and the count of runs with it, until it is done. FuzzLoad sat at 0 runs/s
## for a minute per new input, FuzzParse at 7 runs in 24 s (12k runs/s with the bound).
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 100x
fuzz:
	$(FUZZ) -fuzz '^FuzzParse$$' ./manifest/
	$(FUZZ) -fuzz '^FuzzLoad$$' ./scenarios/
	$(FUZZ) -fuzz '^FuzzParseAnswer$$' ./lab/echo/

## test-vm: the tests that need IPVS, run inside the microVM (microvm), where they must not
## skip: the ipvs backend's, and the shipped scenarios for ipvs at smoke sizes
test-vm: vm-deps build
	KPBENCH_REQUIRE_IPVS=1 $(GO) test $(TEST_FLAGS) -exec "$(abspath $(BIN)) vm exec --" ./backends/ipvs/ ./backends/all/
	KPBENCH_REQUIRE_IPVS=1 $(GO) test $(TEST_FLAGS) -run 'TestShippedScenariosRun/on_ipvs$$' -exec "$(abspath $(BIN)) vm exec --" ./scenarios/

## lint: gofmt, go vet, staticcheck
lint:
	@fmt_out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$fmt_out" ]; then echo "gofmt needed:"; echo "$$fmt_out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

## bench: the default benchmark on the kernel modes: iptables, iptables-legacy and nftables,
## and ipvs where the kernel has IPVS (the workshop VM); where it has not (this machine),
## kpbench says so in one line and runs the rest: ipvs runs in the microVM (make vm-ladder).
## userspace, removed from kube-proxy in 1.26, runs with --backend userspace. Report in
## out/<timestamp>/
bench: deps build
	./$(BIN) run scenarios/bench.yaml --backend iptables,iptables-legacy,nftables --backend-if-available ipvs --out $(OUT)

## vm-ladder: iptables, nftables and ipvs side by side to 5k Services in the microVM (TCG;
## its time here: docs/findings.md, "iptables, nftables and ipvs in the microVM")
vm-ladder: vm-deps build
	./$(BIN) vm run --timeout 60m --mem 3G -- run scenarios/vm-ladder.yaml --backend iptables,nftables,ipvs --out $(OUT)

## scale: the ladder to 20k Services on iptables (with the whole-table cache hint),
## iptables-legacy and nftables (~7 min here; see scenarios/scale.yaml)
scale: deps build
	./$(BIN) run scenarios/scale.yaml --backend iptables,iptables-legacy,nftables --out $(OUT)

## soak: churn at 10k Services for 60 s with a prober (scenarios/churn.yaml): programming
## latency, sync durations, misroutes and false refusals (limits: 0 and 0)
soak: deps build
	./$(BIN) run scenarios/churn.yaml --backend iptables,iptables-legacy,nftables --out $(OUT)

## upstream: build the upstream reference binaries (the list, versions and build times:
## docs/upstream.md) from their Go modules into /var/cache/kpbench/upstream/<version>/bin
## (idempotent; make test runs it; tests that need them skip with "run make upstream" unless
## KPBENCH_REQUIRE_UPSTREAM=1, as in CI)
upstream:
	@bash hack/build-upstream.sh

.PHONY: e2e-build
## e2e-build: build the upstream e2e test binary e2e.test (k8s.io/kubernetes/test/e2e at the
## version of internal/upstream) and the ginkgo CLI that runs it in parallel beside the
## upstream binaries, for `kpbench e2e` (idempotent; the longest build: docs/upstream.md):
## docs/e2e.md
e2e-build: upstream
	@bash hack/build-upstream.sh ginkgo e2e.test

.PHONY: upstream-matrix tools-matrix

## upstream-matrix: the extra kube-proxy versions of the version matrix, one tools module each
## (tools/upstream-v1.33: kube-proxy v1.33.5 into /var/cache/kpbench/upstream/v1.33.5/bin;
## idempotent; build times: docs/upstream.md). make test does not need it: the tests that use it skip.
upstream-matrix:
	@bash hack/build-kube-proxy.sh

## tools-matrix: the Debian trixie tool root (nft 1.1.x, iptables 1.8.11, ...) for --tools
## debian:trixie, built once with mmdebstrap into /var/cache/kpbench/tools (its cost:
## docs/environment-matrix.md)
tools-matrix: build
	./$(BIN) tools prepare debian:trixie

clean:
	rm -rf bin out
