#!/usr/bin/env bash
# Kills a random rank of a 4-rank job RUNS times (default 20) and reports, over the runs, the
# median and 95th percentile of the time from the SIGKILL to the survivors' first committed step
# (the slowest survivor's, per run), and of the reform alone. Not a test: figures for
# docs/performance.md.
#   benchmarks/elastic_kill_bench.sh build [RUNS] [RANKS]
set -euo pipefail
build=$1 runs=${2:-20} ranks=${3:-4}
kills=() reforms=()
for run in $(seq 1 "$runs"); do
  victim=$((RANDOM % ranks))
  out=$(timeout 120 "$build/tools/c10drun" --elastic --nproc-per-node "$ranks" \
    "$build/benchmarks/c10d-elastic-bench" --mode kill --victim "$victim" 2>&1) || true
  kill_ms=$(grep -o 'first committed step [0-9.]* ms' <<<"$out" | awk '{print $4}' | sort -n | tail -1)
  reform_ms=$(grep -o 'reform [0-9.]* ms' <<<"$out" | awk '{print $2}' | sort -n | tail -1)
  [ -n "$kill_ms" ] || { echo "$out"; echo "run $run: no survivor committed"; exit 1; }
  kills+=("$kill_ms") reforms+=("$reform_ms")
  echo "run $run: victim $victim, kill to first commit $kill_ms ms, reform $reform_ms ms"
done
stats() { sort -n | awk '{v[NR]=$1} END {i=int(NR*0.95+0.5); if (i<1) i=1; if (i>NR) i=NR; printf "median %.1f ms, p95 %.1f ms, max %.1f ms", v[int((NR+1)/2)], v[i], v[NR]}'; }
echo "kill to first committed step over $runs kills ($ranks ranks): $(printf '%s\n' "${kills[@]}" | stats)"
echo "reform alone: $(printf '%s\n' "${reforms[@]}" | stats)"
