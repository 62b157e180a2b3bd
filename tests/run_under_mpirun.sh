#!/usr/bin/env bash
# Runs a c10d program under Open MPI's mpirun with NP ranks: ranks come from OMPI_COMM_WORLD_*,
# the store address from MASTER_ADDR/MASTER_PORT (a free loopback port).
# Usage: run_under_mpirun.sh NP PROGRAM [ARGS...]
set -euo pipefail
np=$1
shift
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun --oversubscribe --bind-to none -np "$np" -x MASTER_ADDR -x MASTER_PORT -x C10D_BACKEND \
  -x C10D_TIMEOUT "$@"
