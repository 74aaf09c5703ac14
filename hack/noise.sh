#!/bin/bash
# The noise measurement of docs/ci.md: same-commit pairs of `make bench`-equivalent runs
# (one run of each pair with two bounded busy loops in a kpb namespace), each pair judged
# by `kpbench compare`; then in-run A/B runs (A = B, B 10% and 25% slower) judged by
# `kpbench gate`, single round and 3 rounds. Run as root from the repository after
# `make build`:
#   hack/noise.sh [OUT] [PAIRS] [SCENARIO]   (defaults: out/noise 3 scenarios/bench.yaml)
#   NOISE_PHASE=pairs|ab limits it to one half.
# Every run is bounded by timeout; the busy namespace is removed on exit.
set -u
cd "$(dirname "$0")/.."
K=${KPBENCH:-./bin/kpbench}
OUT=${1:-out/noise}
PAIRS=${2:-3}
S=${3:-scenarios/bench.yaml}
BACKENDS=${NOISE_BACKENDS:-iptables,iptables-legacy,nftables}
PHASE=${NOISE_PHASE:-all}
mkdir -p "$OUT"
busy_start() { # two bounded busy loops in a lab namespace, 12 min at most
  ip netns add kpb-noise-busy 2>/dev/null
  for i in 1 2; do timeout 720 ip netns exec kpb-noise-busy sh -c 'while :; do :; done' & done
}
busy_stop() { for p in $(jobs -p); do kill "$p" 2>/dev/null; done; wait 2>/dev/null; ip netns del kpb-noise-busy 2>/dev/null; }
trap busy_stop EXIT
if [ "$PHASE" != ab ]; then
for pair in $(seq 1 "$PAIRS"); do
  for side in quiet busy; do
    [ $side = busy ] && busy_start
    echo "== pair $pair $side $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)"
    s=$(date +%s); timeout 12m $K run "$S" --backend "$BACKENDS" --out "$OUT/pair$pair-$side" > "$OUT/pair$pair-$side.log" 2>&1
    echo "rc=$? secs=$(( $(date +%s)-s )) load-after: $(cut -d' ' -f1-3 /proc/loadavg)"
    [ $side = busy ] && busy_stop
  done
  $K compare "$OUT/pair$pair-quiet" "$OUT/pair$pair-busy" > "$OUT/compare$pair.txt" 2>&1
  echo "compare pair $pair rc=$? $(tail -1 "$OUT/compare$pair.txt")"
done
fi
[ "$PHASE" = pairs ] && exit 0
AB=${NOISE_AB_SCENARIO:-scenarios/pr.yaml}
# NOISE_AB_VARIANTS, NOISE_AB_ROUNDS choose the runs; NOISE_AB_BUSY=1 adds the busy loops.
for v in ${NOISE_AB_VARIANTS:-same same same slow-10 slow-25}; do
  for rounds in ${NOISE_AB_ROUNDS:-1 3}; do
    [ "${NOISE_AB_BUSY:-0}" = 1 ] && busy_start
    b=iptables@$v; d="$OUT/ab-$v-r$rounds-busy${NOISE_AB_BUSY:-0}-$(date +%s)"
    echo "== ab $v rounds=$rounds $(date -u +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)"
    s=$(date +%s); timeout 10m $K run "$AB" --backend iptables,$b --rounds $rounds --out "$d" > "$d.log" 2>&1
    echo "rc=$? secs=$(( $(date +%s)-s )) load-after: $(cut -d' ' -f1-3 /proc/loadavg)"
    [ "${NOISE_AB_BUSY:-0}" = 1 ] && busy_stop
    $K gate "$d" --a iptables --b $b > "$d.gate.txt" 2>&1
    echo "gate $v rounds=$rounds rc=$? $(grep -c REGRESSION "$d.gate.txt") regression line(s)"
  done
done
