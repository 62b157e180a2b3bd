#!/usr/bin/env bash
# A machine without the NCCL and MPI runtimes, made in a mount namespace that covers this
# machine's libnccl.so.2 and libmpi.so.40 with /dev/null: the installed package's consumer must
# start and run stores, RPC and Gloo, and selecting nccl or mpi must be a clear error.
# Usage: cpu_only_consumer_test.sh BUILD_DIR CONSUMER_SRC BACKEND...
set -euo pipefail
build_dir=$1
consumer_src=$2
shift 2
if ! unshare --mount true 2>/dev/null; then
  echo "skipped: a mount namespace (unshare --mount) needs root here"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$consumer_src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" -j 2 >/dev/null

runtimes=$(ldconfig -p | awk '$1 == "libnccl.so.2" || $1 == "libmpi.so.40" { print $NF }')
echo "hiding: $(echo $runtimes)"
unset LD_LIBRARY_PATH
timeout 120 unshare --mount bash -c '
  for lib in $1; do mount --bind /dev/null "$lib"; done
  shift
  exec "$@"' hide "$runtimes" "$work/build/consumer" --missing "$@"
