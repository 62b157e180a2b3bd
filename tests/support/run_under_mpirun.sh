#!/usr/bin/env bash
# Runs a c10d program under Open MPI's mpirun with NP ranks: ranks come from OMPI_COMM_WORLD_*,
# the store address from MASTER_ADDR/MASTER_PORT (a free loopback port).
# With --no-store, MASTER_ADDR/MASTER_PORT stay unset (an MPI-only job needs no store).
# Usage: run_under_mpirun.sh [--no-store] NP PROGRAM [ARGS...]
set -euo pipefail
store=1
if [ "$1" = --no-store ]; then
  store=0
  shift
fi
np=$1
shift
unset MASTER_ADDR MASTER_PORT
if [ $store = 1 ]; then
  port=$(python3 "$(dirname "$0")/free_port.py")
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
forward=()
for name in MASTER_ADDR MASTER_PORT C10D_BACKEND C10D_TIMEOUT C10D_MPI_ABORT_ON_TIMEOUT; do
  if [ -n "${!name+x}" ]; then forward+=(-x "$name"); fi
done
exec mpirun --oversubscribe --bind-to none -np "$np" "${forward[@]}" "$@"
