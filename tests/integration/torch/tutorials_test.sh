#!/usr/bin/env bash
# The tutorial programs on torch.distributed with backend "c10d", the backend string being all
# that differs from the tutorial: examples/python's four (PyTorch's "Writing Distributed
# Applications", which those import as c10d: here turned back into torch programs) under torchrun
# and under c10drun, each through `python3 -m c10d.torch`, and PyTorch's DDP tutorial spawning
# its ranks. Each must exit 0 and print what its ranks computed.
# Usage: tutorials_test.sh PYTHON EXAMPLES_DIR C10DRUN   (exit 77: no python3-torch or c10d.torch)
set -uo pipefail
python=$1 examples=$2 c10drun=$3
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c "import c10d.torch" 2>/dev/null; then
  echo "skipped: c10d.torch is not built (needs libtorch-dev, python3-torch, pybind11-dev: tools/setup.sh)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for name in p2p_blocking p2p_nonblocking allreduce_group sync_sgd; do
  # The tutorial's own form: torch.distributed as dist; "c10d" where it writes "gloo".
  sed -e 's/^import c10d as dist$/import torch.distributed as dist/' \
      -e "s/backend='gloo'/backend='c10d'/" "$examples/$name.py" >"$work/$name.py"
  if grep -q "import c10d" "$work/$name.py"; then
    echo "FAILED: $name.py still imports c10d after conversion"; failed=1; continue
  fi
  port=$("$python" "$here/../../support/free_port.py")
  if timeout 150 "$python" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 \
      --master_port "$port" --redirects 1 --tee 1 --log_dir "$work/logs-$name" \
      -m c10d.torch "$work/$name.py" >"$work/$name.torchrun.log" 2>&1 \
      && grep -q "Rank  *1" "$work/$name.torchrun.log"; then
    echo "$name under torchrun: ok"
  else
    echo "FAILED: $name under torchrun:"; tail -n 30 "$work/$name.torchrun.log"; failed=1
  fi
  # c10drun's launcher hosts the store at MASTER_PORT and serves torch's client there.
  if timeout 150 "$c10drun" --nproc-per-node 2 "$python" -m c10d.torch "$work/$name.py" \
      >"$work/$name.c10drun.log" 2>&1 && grep -q "Rank  *1" "$work/$name.c10drun.log"; then
    echo "$name under c10drun: ok"
  else
    echo "FAILED: $name under c10drun:"; tail -n 30 "$work/$name.c10drun.log"; failed=1
  fi
done
port=$("$python" "$here/../../support/free_port.py")
if MASTER_PORT=$port timeout 150 "$python" "$examples/torch_ddp_tutorial.py" >"$work/ddp.log" 2>&1 \
    && grep -q '^done$' "$work/ddp.log" && grep -q "checkpoint example on rank 1" "$work/ddp.log"; then
  echo "torch_ddp_tutorial (mp.spawn): ok"
else
  echo "FAILED: torch_ddp_tutorial:"; tail -n 30 "$work/ddp.log"; failed=1
fi
exit $failed
