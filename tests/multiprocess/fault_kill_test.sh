#!/usr/bin/env bash
# A rank SIGKILLed in the middle of an allreduce must end the whole job soon, with a non-zero
# exit, under either launcher:
#   c10drun: stops the other ranks and exits 137, saying which rank was killed;
#   mpirun (mpi backend): Open MPI notices the dead process and aborts the job itself.
# Usage: fault_kill_test.sh c10drun|mpirun FAULT_RANK LAUNCHER_OR_MPIRUN_SCRIPT
set -uo pipefail
mode=$1 program=$2 launcher=$3
export C10D_TIMEOUT=60  # far above the bound below: the end must come from the kill
args=(--kill-rank 2 --kill-at 20 --iters 1000)
start=$(date +%s%N)
case $mode in
  c10drun) output=$(timeout 50 "$launcher" --nproc-per-node 3 "$program" "${args[@]}" 2>&1) ;;
  mpirun) output=$(C10D_BACKEND=mpi timeout 50 bash "$launcher" 3 "$program" "${args[@]}" 2>&1) ;;
  *) echo "fault_kill_test.sh: mode '$mode': expected c10drun or mpirun"; exit 2 ;;
esac
code=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$output"
echo "exit code $code after $elapsed_ms ms"
fail() { echo "FAIL: $*"; exit 1; }
[ "$code" -ne 0 ] || fail "the job exited 0 although rank 2 was killed"
[ "$code" -ne 124 ] || fail "the job was still running after 50 s: it hung"
grep -q "rank 2: killing itself during allreduce #20" <<<"$output" || fail "rank 2 never reached the kill"
if [ "$mode" = c10drun ]; then
  [ "$code" -eq 137 ] || fail "c10drun exited $code, expected 137 (128 + SIGKILL)"
  grep -q "rank 2 killed by signal SIGKILL" <<<"$output" || fail "c10drun did not say which rank died"
else
  grep -q "process rank 2 .*exited on signal 9" <<<"$output" || fail "mpirun did not report rank 2's death"
fi
echo "PASS: the job ended $code within $elapsed_ms ms of starting"
