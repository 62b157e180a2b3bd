#!/usr/bin/env bash
# The Debian packages (cmake/Packaging.cmake): cpack -G DEB from the build tree, each package's
# dependencies checked to be Debian package names this machine has, the three installed with
# dpkg into an empty root (dpkg --root: a clean system of its own, without debootstrap's
# download), then used from there as a program would: a CMake project with find_package(c10d),
# pkg-config, the Python package on 2 ranks under the packaged c10drun; then purged, leaving
# no file behind.
# Usage: deb_package_test.sh BUILD_DIR CONSUMER_SRC VERSION PYTHON EXAMPLE_PY
set -euo pipefail
build=$1 consumer_src=$2 version=$3 python=$4 example=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH C10D_C_LIBRARY

if ! (cd "$build" && cpack -G DEB -B "$work/packages") >"$work/cpack.log" 2>&1; then
  tail -30 "$work/cpack.log"; echo "FAIL: cpack -G DEB failed (above)"; exit 1
fi
arch=$(dpkg --print-architecture)
debs=()
for name in c10d c10d-dev python3-c10d; do
  deb="$work/packages/${name}_${version}_${arch}.deb"
  [ -f "$deb" ] || { ls "$work/packages"; echo "FAIL: no $(basename "$deb")"; exit 1; }
  debs+=("$deb")
  # Every package it depends on is a Debian package (ours aside) this machine has installed.
  for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*)//; s/ //g'); do
    case "$dep" in c10d|c10d-dev) continue ;; esac
    dpkg-query -W -f='${Status}' "$dep" 2>/dev/null | grep -q "install ok installed" \
      || { echo "FAIL: $name depends on '$dep', which is not an installed Debian package here"; exit 1; }
  done
  echo "$name: $(dpkg-deb -f "$deb" Installed-Size) KiB installed; Depends: $(dpkg-deb -f "$deb" Depends)"
done

# An empty system for dpkg --root: its database and nothing else.
empty_root() {
  mkdir -p "$1/var/lib/dpkg/info" "$1/var/lib/dpkg/updates" "$1/var/lib/dpkg/triggers"
  touch "$1/var/lib/dpkg/status"
}

# python3-c10d alone is refused, naming the package it needs.
lone=$work/lone
empty_root "$lone"
if dpkg --root="$lone" -i "$work/packages/python3-c10d_${version}_${arch}.deb" >"$work/lone.log" 2>&1 \
    || ! grep -q "depends on c10d" "$work/lone.log"; then
  cat "$work/lone.log"
  echo "FAIL: python3-c10d without c10d was not refused for the missing dependency"; exit 1
fi

root=$work/root
empty_root "$root"
# Ours only: the dependencies are the host's (checked above), not in the empty root.
dpkg --root="$root" --force-depends -i "${debs[@]}" >"$work/dpkg.log" 2>&1 \
  || { cat "$work/dpkg.log"; echo "FAIL: dpkg -i of the packages failed"; exit 1; }
usr=$root/usr
[ -x "$usr/bin/c10drun" ] || { echo "FAIL: no /usr/bin/c10drun from the packages"; exit 1; }

cmake -S "$consumer_src" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$usr" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" -j 2 >/dev/null
LD_LIBRARY_PATH=$usr/lib "$work/consumer/consumer"
flags=$(PKG_CONFIG_PATH=$usr/lib/pkgconfig pkg-config --libs c10d)
echo "$flags" | grep -q -- "-L$usr/lib" || { echo "FAIL: pkg-config gives '$flags'"; exit 1; }
site=$(dirname "$(dirname "$(find "$usr" -path "*/c10d/_library.py" | head -1)")")
# Where Debian's python3 reads the system's packages, without PYTHONPATH.
[ "$site" = "$usr/lib/python3/dist-packages" ] \
  || { echo "FAIL: python3-c10d puts the package in ${site#$root}, not /usr/lib/python3/dist-packages"; exit 1; }
where=$(PYTHONPATH=$site "$python" -c "import c10d; print(c10d._capi.library_file())")
case "$where" in "$usr"/lib/*) ;; *) echo "FAIL: python3-c10d loaded $where"; exit 1 ;; esac
PYTHONPATH=$site timeout 120 "$usr/bin/c10drun" --nproc-per-node 2 \
  "$python" "$example" --numpy >"$work/example.log" 2>&1 \
  || { cat "$work/example.log"; echo "FAIL: $(basename "$example") from the packages"; exit 1; }

dpkg --root="$root" --purge python3-c10d c10d-dev c10d >"$work/purge.log" 2>&1 \
  || { cat "$work/purge.log"; echo "FAIL: dpkg --purge failed"; exit 1; }
left=$(find "$root" -path "$root/var" -prune -o \( -type f -o -type l \) -print | head -5)
[ -z "$left" ] || { echo "$left"; echo "FAIL: removing the packages left files behind"; exit 1; }
echo "PASS: 3 Debian packages built, installed into an empty root, used (CMake, pkg-config," \
  "Python under c10drun) and purged clean"
