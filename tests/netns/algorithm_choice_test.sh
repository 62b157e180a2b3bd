#!/usr/bin/env bash
# The allreduce the cost model chooses across hosts is never the slowest algorithm where the
# choice matters: on 4 namespace hosts with 1 Gbit/s links (benchmarks/multi_host_bench.sh), each
# size from 4 KiB to 1 MiB is timed with every algorithm forced (C10D_ALLREDUCE_ALGO) and with
# the choice, twice; wherever the slowest algorithm's p50 is more than 10% over the fastest's,
# the choice's p50 must be under the slowest's. A benchmark more than a test (label "long").
# Exits 77 (ctest: skipped) where namespaces cannot be made.
# Usage: algorithm_choice_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
bench=$(dirname "$0")/../../benchmarks/multi_host_bench.sh
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "SKIPPED: needs root, iproute2 and tc to make hosts of network namespaces"
  exit 77
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in 1 2; do
  for algorithm in recursive_doubling halving_doubling ring auto; do
    C10D_ALLREDUCE_ALGO=$algorithm MULTI_HOST_BENCH_OURS_ONLY=1 timeout 300 \
      bash "$bench" "$build" 4 1gbit 1 -- --op allreduce -b 4K -e 1M -f 4 -n 20 |
      awk -v a="$algorithm" '/^\| [0-9]/ {print a, $2, $4}' >>"$results" ||
      { echo "FAIL: the benchmark failed with C10D_ALLREDUCE_ALGO=$algorithm"; exit 1; }
  done
done
# Medians of the two rounds would need more; the better of two keeps one slow run from failing it.
awk '
  { key = $1 " " $2; if (!(key in best) || $3 < best[key]) best[key] = $3; sizes[$2] = 1 }
  END {
    failures = 0
    for (size in sizes) {
      fastest = 1e30; slowest = 0
      split("recursive_doubling halving_doubling ring", names, " ")
      for (i = 1; i <= 3; i++) {
        t = best[names[i] " " size]
        if (t == "") { print "FAIL: no time for " names[i] " at " size " B"; failures++; continue }
        if (t < fastest) fastest = t
        if (t > slowest) { slowest = t; slowName = names[i] }
      }
      chosen = best["auto " size]
      verdict = (slowest > 1.1 * fastest && chosen >= slowest) ? "FAIL" : "ok"
      if (verdict == "FAIL") failures++
      printf "%s %s B: chosen %.0f us; fastest %.0f, slowest %.0f (%s)\n", verdict, size, chosen, fastest, slowest, slowName
    }
    if (failures == 0) print "PASS: the chosen allreduce was never the slowest where it mattered"
    exit failures > 0
  }' "$results"
