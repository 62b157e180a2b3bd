#!/usr/bin/env bash
# Runs c10d-rpc-bench N times (two local workers under c10drun) and prints the median of each
# figure with every run's value: single runs of it move by 20-30% on a shared host.
# Usage: benchmarks/rpc_bench_repeat.sh BUILD_DIR [RUNS]   (default 10 runs)
set -euo pipefail
build=$1
runs=${2:-10}
for _ in $(seq "$runs"); do
  "$build/tools/c10drun" --nproc-per-node 2 "$build/benchmarks/c10d-rpc-bench" --json 2>&1 |
    grep -o '{.*}'
done | python3 -c '
import json, statistics, sys
rows = [json.loads(line) for line in sys.stdin]
for key in ("rpc_sync_median_us", "rpc_sync_p99_us", "rpc_async_calls_per_s",
            "echo_1MiB_GBps", "echo_16MiB_GBps"):
    values = [row[key] for row in rows]
    print("%-22s median %10.2f   runs: %s" % (key, statistics.median(values),
          " ".join("%g" % round(v, 2) for v in values)))
'
