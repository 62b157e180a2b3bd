#!/usr/bin/env bash
# Installs the built c10d into a temporary prefix and builds tests/integration/install/install_headers against it:
# every installed header compiled alone, as a user would include it; then, where the MPI backend
# was built, own_mpi_init (MPI_Init by the program, newMpiProcessGroup(MPI_COMM_WORLD)) under
# mpirun on 2 ranks.
# Usage: install_headers_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DC10D_HEADERS="$work/prefix/include/c10d" | grep "installed headers" || true
if ! cmake --build "$work/build" -j 2 >"$work/log" 2>&1; then
  grep -B 2 -A 12 -m 10 "error" "$work/log" | head -150
  echo "FAIL: an installed header does not compile on its own (above)"
  exit 1
fi
headers=$(find "$work/prefix/include/c10d" -name '*.hpp' -o -name '*.h' | wc -l)
if [ -x "$work/build/own_mpi_init" ]; then
  timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$work/build/own_mpi_init"
  echo "PASS: $headers installed headers compile alone; newMpiProcessGroup(MPI_COMM_WORLD) works from the install"
else
  echo "PASS: $headers installed headers compile alone (the MPI backend is not built: no MPI program)"
fi
