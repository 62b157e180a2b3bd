#!/usr/bin/env bash
# Repeated kill runs, launched without a launcher so that every survivor's own exit is seen:
# 3 ranks run an op in a loop (tests/multiprocess/fault_rank.cpp), rank 2 SIGKILLs itself in the middle of
# one, and each survivor must fail on its own, within BOUND_MS of starting its failed op, with
# an error that names rank 2, and exit 1: never 0, never a timeout, never death by a signal
# (SIGPIPE from writing to the dead rank's sockets was seen in 1 to 3 of 10 such runs).
# Usage: fault_kill_repeat.sh FAULT_RANK OP ELEMENTS RUNS
#   OP: allreduce | ring | ring-anysource | ring-batched (see fault_rank --help)
set -uo pipefail
program=$1 op=$2 elements=$3 runs=$4
bound_ms=${C10D_KILL_BOUND_MS:-2000}
export C10D_TIMEOUT=60  # far above the bound: failing inside it means the loss was noticed
export WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: run $run: $*"; for r in 0 1 2; do sed "s/^/[rank $r] /" "$work/$r.out"; done; exit 1; }

for run in $(seq 1 "$runs"); do
  export MASTER_PORT=$(python3 "$(dirname "$0")/../support/free_port.py")
  kill_at=$(( 5 + RANDOM % 10 ))  # vary where in the loop the kill falls
  pids=()
  for rank in 0 1 2; do
    RANK=$rank LOCAL_RANK=$rank timeout 30 "$program" --op "$op" --elements "$elements" \
      --kill-rank 2 --kill-at "$kill_at" --iters 100000 >"$work/$rank.out" 2>&1 &
    pids+=($!)
  done
  codes=()
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; codes+=($?); done
  grep -q "rank 2: killing itself" "$work/2.out" || fail "rank 2 never reached the kill"
  [ "${codes[2]}" -eq 137 ] || fail "rank 2 exited ${codes[2]}, expected 137 (SIGKILL)"
  for rank in 0 1; do
    code=${codes[$rank]}
    [ "$code" -ne 124 ] || fail "rank $rank was still running after 30 s: it hung"
    [ "$code" -lt 128 ] || fail "rank $rank died of signal $((code - 128)) (exit $code)"
    [ "$code" -eq 1 ] || fail "rank $rank exited $code, expected 1 (its op failed)"
    line=$(grep "failed after" "$work/$rank.out") || fail "rank $rank printed no error of its own"
    ms=$(sed -E 's/.*failed after ([0-9]+) ms.*/\1/' <<<"$line")
    [ "$ms" -le "$bound_ms" ] || fail "rank $rank failed after $ms ms, over $bound_ms ms: $line"
    grep -Eq "ranks? (2|[0-9, ]*, 2)( of group '[^']*')? (is|are) no longer running|is rank 2 of group" <<<"$line" ||
      fail "rank $rank's error does not name rank 2 as lost: $line"
    echo "run $run rank $rank: ${line:0:300}"
  done
done
echo "PASS: $runs kill runs of $op ($elements float32): every survivor failed on its own within ${bound_ms} ms naming rank 2"
