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
echo "PASS: the installed package imports from the prefix and runs under the installed c10drun"
