#!/usr/bin/env bash
# The installed Python package: cmake --install into a prefix, move the prefix (relocatable),
# then import c10d from the prefix's site-packages and run a tutorial program under the
# installed c10drun. Usage: install_test.sh BUILD_DIR PYTHON SITE_PACKAGES EXAMPLE
set -euo pipefail
build=$1 python=$2 site=$3 example=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/moved"
export PYTHONPATH=$work/moved/$site
where=$("$python" -c "import c10d, os; print(os.path.dirname(c10d.__file__)); print(c10d._capi.library_file())")
echo "$where"
echo "$where" | grep -q "^$work/moved/" || { echo "FAIL: c10d was not imported from the prefix"; exit 1; }
[ "$(echo "$where" | grep -c "^$work/moved/")" -eq 2 ] \
  || { echo "FAIL: the package did not load the prefix's libc10d_c"; exit 1; }
timeout 120 "$work/moved/bin/c10drun" --nproc-per-node 2 "$python" "$example" --numpy
# c10d.torch, where it was built: torch's DDP tutorial on the prefix's backend (its module finds
# libc10d through a RUNPATH relative to itself, so the moved prefix proves that too).
if ls "$work/moved/$site"/c10d/_torch_backend*.so >/dev/null 2>&1; then
  "$python" -c "import c10d.torch, sys; sys.exit(not c10d.torch.__file__.startswith('$work/moved/'))" \
    || { echo "FAIL: c10d.torch was not imported from the prefix"; exit 1; }
  MASTER_PORT=$("$python" "$(dirname "$0")/../../support/free_port.py") \
    timeout 120 "$python" "$(dirname "$example")/torch_ddp_tutorial.py" | tee "$work/ddp.log"
  grep -q '^done$' "$work/ddp.log" || { echo "FAIL: the DDP tutorial did not finish"; exit 1; }
fi
echo "PASS: the installed package imports from the prefix and runs under the installed c10drun"
