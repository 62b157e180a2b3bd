#!/usr/bin/env bash
# Runs PROGRAM under Debian's torchrun (PyTorch 1.13) with N local workers, as users launch jobs.
# RDZV: static (torchrun's default: workers join the agent's store) or c10d (rank 0 hosts ours).
# Usage: torchrun.sh PYTHON RDZV N PROGRAM [ARGS...]   (exit 77: no python3-torch)
set -uo pipefail
python=$1 rdzv=$2 nproc=$3
shift 3
if ! "$python" -c "import torch.distributed.run" 2>/dev/null; then
  echo "skipped: python3-torch is not installed (tools/setup.sh installs it)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$("$python" "$(dirname "$0")/../../support/free_port.py")
case $rdzv in
  static) rdzv_args=(--master_addr 127.0.0.1 --master_port "$port") ;;
  c10d) rdzv_args=(--rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port") ;;
  *) echo "unknown rendezvous '$rdzv'"; exit 2 ;;
esac
# --redirects 1 --tee 1: Debian's torchrun 1.13 crashes on Python 3.11 with its defaults
# (../shared/notes/machine-facts.md). --no_python: PROGRAM is any executable (a Python script
# runs with its shebang's interpreter).
cd "$work"
exec timeout 150 "$python" -m torch.distributed.run --nproc_per_node "$nproc" "${rdzv_args[@]}" \
  --no_python --redirects 1 --tee 1 --log_dir "$work/logs" "$@"
