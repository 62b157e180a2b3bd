#!/usr/bin/env bash
# pip's way in: `pip wheel --no-build-isolation` of the checkout (packaging the build tree as it
# is, C10D_BUILD_DIR), the wheel installed into a new virtual environment (with the system's
# NumPy and torch), and from there, with no PYTHONPATH and no C10D_C_LIBRARY: the package and
# its library imported from the environment, the tutorial programs on 2 ranks under the wheel's
# c10drun, torch's DDP tutorial on c10d.torch where torch is present, and pip uninstall leaving
# nothing of the package behind.
# Usage: wheel_test.sh SOURCE_DIR BUILD_DIR PYTHON VERSION
set -euo pipefail
src=$1 build=$2 python=$3 version=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH C10D_C_LIBRARY

if ! C10D_BUILD_DIR=$build "$python" -m pip wheel --no-build-isolation --no-deps --no-index \
    -w "$work/dist" "$src" >"$work/wheel.log" 2>&1; then
  tail -30 "$work/wheel.log"
  echo "FAIL: pip wheel of the checkout failed (above)"
  exit 1
fi
wheel=$(ls "$work"/dist/c10d-"$version"-*.whl 2>/dev/null || true)
[ -n "$wheel" ] || { ls "$work/dist"; echo "FAIL: no c10d-$version-*.whl built"; exit 1; }
echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"

"$python" -m venv --system-site-packages "$work/venv"
venv=$work/venv
"$venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
cd "$work"  # nothing importable as c10d here but the environment's
where=$("$venv/bin/python" -c "import c10d, os; print(os.path.dirname(c10d.__file__)); print(c10d._capi.library_file())")
echo "$where"
[ "$(echo "$where" | grep -c "^$venv/")" -eq 2 ] \
  || { echo "FAIL: c10d or its library was not loaded from the environment"; exit 1; }
[ "$("$venv/bin/python" -m pip show c10d | sed -n 's/^Version: //p')" = "$version" ] \
  || { echo "FAIL: pip show c10d does not say version $version"; exit 1; }

for example in p2p_blocking p2p_nonblocking allreduce_group sync_sgd; do
  timeout 120 "$venv/bin/c10drun" --nproc-per-node 2 "$venv/bin/python" \
    "$src/examples/python/$example.py" --numpy >"$work/$example.log" 2>&1 \
    || { cat "$work/$example.log"; echo "FAIL: $example under the wheel's c10drun"; exit 1; }
  echo "$example under the wheel's c10drun: ok"
done
ran="the four tutorials"
if "$python" -c "import torch" 2>/dev/null && ls "$venv"/lib/python3*/site-packages/c10d/_torch_backend*.so >/dev/null 2>&1; then
  MASTER_PORT=$("$python" "$src/tests/support/free_port.py") \
    timeout 120 "$venv/bin/python" "$src/examples/python/torch_ddp_tutorial.py" >"$work/ddp.log" 2>&1
  grep -q '^done$' "$work/ddp.log" || { cat "$work/ddp.log"; echo "FAIL: the DDP tutorial did not finish"; exit 1; }
  ran="$ran and torch's DDP tutorial on c10d.torch"
fi

"$venv/bin/python" -m pip uninstall -q -y c10d
left=$(find "$venv" -path "*site-packages/c10d*" -o -name c10drun | head -5)
[ -z "$left" ] || { echo "$left"; echo "FAIL: pip uninstall left these behind"; exit 1; }
echo "PASS: the wheel installs with pip, runs $ran from a new environment, and uninstalls clean"
