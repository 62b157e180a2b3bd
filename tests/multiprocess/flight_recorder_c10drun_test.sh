#!/usr/bin/env bash
# With C10D_FLIGHT_RECORDER_SIGNAL set, c10drun asks the surviving ranks for their flight
# recorder dumps when one rank dies, and tools/flight_report.py reads them.
# Usage: flight_recorder_c10drun_test.sh C10DRUN FAULT_RANK SOURCE_DIR
set -uo pipefail
c10drun=$1 program=$2 source=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
C10D_FLIGHT_RECORDER_DIR=$dir C10D_FLIGHT_RECORDER_SIGNAL=USR1 C10D_TIMEOUT=60 \
  timeout 60 "$c10drun" --nproc-per-node 3 "$program" --kill-rank 2 --kill-at 20 --iters 1000 2>&1 |
  grep -v " W "
report=$(python3 "$source/tools/flight_report.py" "$dir")
status=$?
echo "$report"
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$dir/c10d_flight_default_rank0.json" ] && [ -f "$dir/c10d_flight_default_rank1.json" ] ||
  fail "ranks 0 and 1 left no dump"
[ $status -eq 1 ] || fail "flight_report.py exited $status, expected 1 (a rank is missing)"
grep -q "no dump from rank 2" <<<"$report" || fail "the report does not name rank 2 as missing"
# Rank 2 starts allreduce #20, then kills itself: whether its part of #20 reached the others
# first is a race, so they fail in #20 or, having finished it, in #21.
grep -qE "furthest: ranks 0, 1 at #2[01] allreduce float32\[1024\] sum" <<<"$report" ||
  fail "the report does not place ranks 0 and 1 at collective #20 or #21"
echo PASS
