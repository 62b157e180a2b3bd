#!/usr/bin/env bash
# Installs the built c10d into a temporary prefix, moves that prefix elsewhere (the package must
# be relocatable), then builds and runs an outside project against it with find_package(c10d).
set -euo pipefail
build_dir=$1
consumer_src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/moved"
cmake -S "$consumer_src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/moved" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" -j 2 >/dev/null
"$work/build/consumer"
