#!/usr/bin/env bash
# PyTorch's distributed suite on torch's gloo, on c10d, and on c10d standing in for gloo, then
# the comparison (compare.py; exit 1 when a test gloo passes passes on neither of ours).
# Usage: run_all.sh PYTHON OUT_DIR [WORLD_SIZE]   (exit 77: no python3-torch or no c10d.torch)
set -uo pipefail
python=$1 out=$2 world=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c "import c10d.torch" 2>/dev/null; then
  echo "skipped: c10d.torch is not built (needs libtorch-dev, python3-torch, pybind11-dev: tools/setup.sh)"
  exit 77
fi
mkdir -p "$out"
for backend in gloo c10d c10d-as-gloo; do
  # Each test has its own timeout inside; this one bounds the whole run.
  timeout 900 "$python" "$here/run_distributed_suite.py" --backend "$backend" \
    --world-size "$world" --out "$out/$backend.json" >"$out/$backend.log" 2>&1
  code=$?
  tail -n 1 "$out/$backend.log"
  if [ $code -ne 0 ] || [ ! -s "$out/$backend.json" ]; then
    echo "the $backend run failed (exit $code); the end of $out/$backend.log:"
    tail -n 40 "$out/$backend.log"
    exit 1
  fi
done
exec "$python" "$here/compare.py" "$out/gloo.json" "$out/c10d.json" "$out/c10d-as-gloo.json" \
  --markdown "$out/table.md"
