#!/usr/bin/env bash
# Installs every Debian package that c10d's build, tests, examples and benchmarks need.
# Idempotent: apt runs only when a package is missing. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libuv1-dev libdlpack-dev libcli11-dev libmsgpack-cxx-dev
  libgloo-dev libopenmpi-dev openmpi-bin libxxhash-dev nlohmann-json3-dev
  libgtest-dev python3 libssl-dev
  clang libclang-rt-14-dev iproute2
  libtorch-dev python3-torch python3-numpy python3-pytest pybind11-dev python3-dev
  python3-pip python3-venv python3-setuptools python3-wheel doxygen
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
