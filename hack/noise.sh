#!/bin/bash
# The noise measurement of docs/ci.md: same-commit pairs of scenarios/pr.yaml (one run of
# each pair with two bounded busy loops in a kpb namespace), each pair judged by
# `kpbench compare`; then in-run A/B runs (A = B, B 10% and 50% slower) judged by
# `kpbench gate`. Run as root from the repository after `make build`:
#   hack/noise.sh [OUT]        (default out/noise)
# Every run is bounded by timeout; the busy namespace is removed on exit.
set -u
cd "$(dirname "$0")/.."
K=./bin/kpbench
S=scenarios/pr.yaml
OUT=${1:-out/noise}
mkdir -p "$OUT"
busy_start() { # two bounded busy loops in a lab namespace, 90 s at most
  ip netns add kpb-noise-busy 2>/dev/null
  for i in 1 2; do timeout 90 ip netns exec kpb-noise-busy sh -c 'while :; do :; done' & done
}
busy_stop() { for p in $(jobs -p); do kill "$p" 2>/dev/null; done; wait 2>/dev/null; ip netns del kpb-noise-busy 2>/dev/null; }
trap busy_stop EXIT
for pair in 1 2 3; do
  for side in quiet busy; do
    [ $side = busy ] && busy_start
    echo "== pair $pair $side load: $(cut -d' ' -f1-3 /proc/loadavg)"
    s=$(date +%s); timeout 5m $K run $S --backend iptables --out "$OUT/pair$pair-$side" > "$OUT/pair$pair-$side.log" 2>&1
    echo "rc=$? secs=$(( $(date +%s)-s )) load-after: $(cut -d' ' -f1-3 /proc/loadavg)"
    [ $side = busy ] && busy_stop
  done
  $K compare "$OUT/pair$pair-quiet" "$OUT/pair$pair-busy" --threshold 10% > "$OUT/compare$pair.txt" 2>&1
  echo "compare pair $pair rc=$? $(tail -1 "$OUT/compare$pair.txt")"
done
for v in same slow-10 slow-50; do
  b=iptables@$v
  echo "== ab $v load: $(cut -d' ' -f1-3 /proc/loadavg)"
  s=$(date +%s); timeout 8m $K run $S --backend iptables,$b --out "$OUT/ab-$v" > "$OUT/ab-$v.log" 2>&1
  echo "rc=$? secs=$(( $(date +%s)-s )) load-after: $(cut -d' ' -f1-3 /proc/loadavg)"
  $K gate "$OUT/ab-$v" --a iptables --b $b --threshold 10% > "$OUT/gate-$v.txt" 2>&1
  echo "gate $v rc=$? $(tail -2 "$OUT/gate-$v.txt" | head -1)"
done
