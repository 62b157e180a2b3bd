#!/usr/bin/env bash
# docs/backends.md must be what tools/gen_backends_md.sh produces from this build. The file is
# generated either without a GPU (its CUDA part then comes from the backends' refusals) or on a
# machine with one; where the two differ by design, only the part outside the CUDA markers is
# compared.
# Usage: backends_md_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
fresh=$(mktemp)
trap 'rm -f "$fresh" "$fresh.tmp"' EXIT
bash "$source/tools/gen_backends_md.sh" "$build" "$fresh" >/dev/null
without_cuda() { sed '/^<!-- cuda -->$/,/^<!-- \/cuda -->$/d' "$1"; }
# The CUDA part is compared only when it was generated as this machine would: both without a
# GPU. A part run on a GPU (its first line names the devices) is kept as measured there.
committed_on_gpu=$(grep -c '^CUDA cells run on:' "$source/docs/backends.md" || true)
if [ "$("$build/tools/c10d-backend-matrix" --cuda-devices)" -eq 0 ] && [ "$committed_on_gpu" -eq 0 ]; then
  without_cuda() { cat "$1"; }
fi
if ! diff -u <(without_cuda "$source/docs/backends.md") <(without_cuda "$fresh"); then
  echo "docs/backends.md is out of date: run tools/gen_backends_md.sh $build" >&2
  exit 1
fi
rows=$(grep -c '^| ' "$fresh")
echo "docs/backends.md matches this build ($rows table rows checked)"
