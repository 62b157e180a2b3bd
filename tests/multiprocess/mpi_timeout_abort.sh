#!/usr/bin/env bash
# Usage: mpi_timeout_abort.sh RUN_UNDER_MPIRUN PROGRAM. Passes when mpirun exits non-zero within
# 20 s and the log names the collective that passed its timeout.
set -uo pipefail
start=$(date +%s)
log=$(timeout 60 bash "$1" --no-store 2 "$2" 2>&1)
code=$?
elapsed=$(( $(date +%s) - start ))
echo "$log"
echo "mpirun exit code $code after ${elapsed} s"
if [ $code -eq 0 ]; then echo "FAIL: the job exited 0"; exit 1; fi
if [ $elapsed -gt 20 ]; then echo "FAIL: took ${elapsed} s (timeout is 1 s)"; exit 1; fi
if ! grep -q "allreduce float32\[16\] sum (group 'default', seq 0) on rank 0 passed its timeout" <<<"$log"; then
  echo "FAIL: the log does not name the timed-out allreduce"; exit 1
fi
echo "PASS"
