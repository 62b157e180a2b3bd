#!/usr/bin/env bash
# Runs PROGRAM under c10drun on CUDA devices, or exits 77 (ctest: skipped) with a message when
# this machine lacks what the run needs.
# Usage: run_on_gpus.sh MATRIX_TOOL C10DRUN MIN_RANKS MAX_RANKS one|shared PROGRAM [ARGS...]
#   one:    one rank per GPU (NCCL refuses two ranks on one device): min(GPUs, MAX_RANKS) ranks.
#   shared: ranks may share a GPU (host staging): MAX_RANKS ranks on however many GPUs exist.
set -euo pipefail
matrix=$1 c10drun=$2 min_ranks=$3 max_ranks=$4 placement=$5
shift 5
gpus=$("$matrix" --cuda-devices)
if [ "$gpus" -eq 0 ]; then
  echo "SKIPPED: no CUDA device on this machine; this test runs where one is"
  exit 77
fi
case $placement in
  one) ranks=$(( gpus < max_ranks ? gpus : max_ranks )) ;;
  shared) ranks=$max_ranks ;;
  *) echo "run_on_gpus.sh: placement '$placement': expected one or shared" >&2; exit 2 ;;
esac
if [ "$ranks" -lt "$min_ranks" ]; then
  echo "SKIPPED: $(basename "$1") needs $min_ranks ranks with a GPU each; this machine has $gpus GPU(s)"
  exit 77
fi
exec "$c10drun" --nproc-per-node "$ranks" "$@"
