#!/usr/bin/env bash
# Installs the built c10d into a temporary prefix, moves the prefix (the .pc files find it from
# their own place), then checks every installed .pc file and builds
# tests/integration/install/pkgconfig_consumer with a plain Makefile through pkg-config alone,
# and runs what it built: the C++ program alone, the C example on 2 ranks under the installed
# c10drun, and (where the MPI backend is installed) a program with its own MPI_COMM_WORLD under
# mpirun on 2 ranks.
# Usage: pkgconfig_consumer_test.sh BUILD_DIR CONSUMER_SRC VERSION
set -euo pipefail
build_dir=$1
consumer_src=$2
version=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/moved"
pc=$(find "$work/moved" -name c10d.pc)
[ -n "$pc" ] || { echo "FAIL: no c10d.pc in the install"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
for file in "$PKG_CONFIG_PATH"/*.pc; do
  name=$(basename "$file" .pc)
  pkg-config --validate "$name"
  found=$(pkg-config --modversion "$name")
  [ "$found" = "$version" ] || { echo "FAIL: $name.pc says version $found, the build $version"; exit 1; }
done
for name in c10d c10d-rpc c10d-c; do
  [ -f "$PKG_CONFIG_PATH/$name.pc" ] || { echo "FAIL: $name.pc is not installed"; exit 1; }
done
# The paths it gives are inside the moved install, not where it was installed.
libdir=$(pkg-config --variable=libdir c10d)
[ -f "$libdir/libc10d.so" ] || { echo "FAIL: c10d.pc's libdir $libdir has no libc10d.so"; exit 1; }
case "$(realpath "$libdir")" in
  "$(realpath "$work/moved")"/*) ;;
  *) echo "FAIL: c10d.pc's libdir $libdir is outside the moved install"; exit 1 ;;
esac

mkdir "$work/build"
if ! make -s -f "$consumer_src/Makefile" OUT="$work/build" >"$work/log" 2>&1; then
  cat "$work/log"
  echo "FAIL: the Makefile project does not build through pkg-config (above)"
  exit 1
fi
export LD_LIBRARY_PATH=$libdir
"$work/build/consumer"
timeout 120 "$work/moved/bin/c10drun" --nproc-per-node 2 "$work/build/consumer_c"
built="consumer, consumer_c"
if [ -x "$work/build/own_mpi_init" ]; then
  timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH \
    "$work/build/own_mpi_init"
  built="$built, own_mpi_init"
fi
echo "PASS: $(ls "$PKG_CONFIG_PATH" | wc -l) pkg-config files valid at version $version;" \
  "a Makefile project built and ran $built from the moved install"
