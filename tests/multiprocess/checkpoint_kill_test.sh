#!/usr/bin/env bash
# RUNS times: a job of 3 ranks saves checkpoints in a loop; after a random delay one random rank
# (every fifth run: every rank) is SIGKILLed, wherever its save is. Then one process must find
# the newest complete checkpoint, verify every checksum and load it with step N's contents, and
# every other folder must be complete or named .partial; a checkpoint whose save returned on rank 0
# before the kill must be there (latest is that step or a later one).
# Usage: checkpoint_kill_test.sh SAVE_LOOP C10DRUN [RUNS]
set -uo pipefail
program=$1 launcher=$2 runs=${3:-30}
export C10D_TIMEOUT=10
fail() { echo "FAIL: $*"; exit 1; }
partial_runs=0
verified_runs=0
for run in $(seq 1 "$runs"); do
  root=$(mktemp -d /tmp/c10d-ckpt-kill-XXXXXX)
  timeout 60 "$launcher" --nproc-per-node 3 "$program" save "$root" >"$root.log" 2>&1 &
  job=$!
  # 0.3 to 1.5 s: past the first saves, at any moment of a later one
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.3 + (r % 1200) / 1000 }')"
  pids=($(pgrep -f "$program save $root" | grep -v "^$job\$"))
  ranks=()
  for pid in "${pids[@]}"; do
    # the ranks, not c10drun (whose command line holds the program's too)
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = "$(basename "$program" | cut -c1-15)" ] && ranks+=("$pid")
  done
  [ ${#ranks[@]} -gt 0 ] || { cat "$root.log"; fail "run $run: no rank was running to kill"; }
  if [ $((run % 5)) -eq 0 ]; then
    victims=("${ranks[@]}")
  else
    victims=("${ranks[$((RANDOM % ${#ranks[@]}))]}")
  fi
  kill -9 "${victims[@]}" 2>/dev/null
  wait "$job"
  saved=$(grep -c "saved step" "$root.log")
  committed=$(grep -o "rank 0 saved step [0-9]*" "$root.log" | tail -1 | awk '{print $5}')
  ls "$root" | grep -q '\.partial$' && partial_runs=$((partial_runs + 1))
  result=$("$program" check "$root" 2>&1) || { cat "$root.log"; echo "$result"; ls -la "$root"; fail "run $run"; }
  found=$(grep -o "(step [0-9]*)" <<<"$result" | tr -dc '0-9')
  if [ -n "$committed" ]; then
    [ -n "$found" ] && [ "$found" -ge "$committed" ] ||
      { ls -la "$root"; fail "run $run: rank 0's save of step $committed returned, but the newest complete checkpoint is '${found:-none}'"; }
  fi
  [ -n "$found" ] && verified_runs=$((verified_runs + 1))
  echo "run $run: killed ${#victims[@]} of ${#ranks[@]} ranks after $saved saves; $result"
  rm -rf "$root" "$root.log"
done
echo "$partial_runs of $runs runs left a partial checkpoint behind (killed mid-save)"
[ $((verified_runs * 2)) -ge "$runs" ] ||
  fail "only $verified_runs of $runs runs had a complete checkpoint to verify: the kills came before any save finished"
echo "PASS: $runs runs, the newest complete checkpoint verified and loaded after every kill"
