#!/usr/bin/env bash
# Runs PROGRAM under c10drun on as many ranks as there are GPUs (at most MAX_RANKS), or exits 77
# (ctest: skipped) with a message when this machine has no CUDA device.
# Usage: run_on_gpus.sh MATRIX_TOOL C10DRUN MAX_RANKS PROGRAM [ARGS...]
set -euo pipefail
matrix=$1 c10drun=$2 max_ranks=$3
shift 3
gpus=$("$matrix" --cuda-devices)
if [ "$gpus" -eq 0 ]; then
  echo "SKIPPED: no CUDA device on this machine; this test runs where one is"
  exit 77
fi
ranks=$(( gpus < max_ranks ? gpus : max_ranks ))
exec "$c10drun" --nproc-per-node "$ranks" "$@"
