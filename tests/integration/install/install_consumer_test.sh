#!/usr/bin/env bash
# Installs the built c10d into a temporary prefix, moves that prefix elsewhere (the package must
# be relocatable), then builds and runs an outside project against it with find_package(c10d).
# Usage: install_consumer_test.sh BUILD_DIR CONSUMER_SRC [RANKS]
# With RANKS, the consumer runs under the installed c10drun with that many local ranks.
set -euo pipefail
build_dir=$1
consumer_src=$2
ranks=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/moved"
cmake -S "$consumer_src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/moved" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" -j 2 >/dev/null
# The tools users are told to run come with the package.
"$work/moved/bin/flight_report.py" --help >/dev/null
"$work/moved/bin/c10d-checkpoint" --help >/dev/null
if [ -n "$ranks" ]; then
  timeout 120 "$work/moved/bin/c10drun" --nproc-per-node "$ranks" "$work/build/consumer"
  # Other consumer programs (the C checkpoint example) take a folder to write into.
  for program in "$work"/build/consumer_*; do
    [ -x "$program" ] || continue
    timeout 120 "$work/moved/bin/c10drun" --nproc-per-node "$ranks" "$program" "$work"
  done
else
  "$work/build/consumer"
fi
