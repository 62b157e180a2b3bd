#!/usr/bin/env bash
# docs/backends.md must be what tools/gen_backends_md.sh produces from this build. The file is
# generated without a GPU (its CUDA part then comes from the backends' refusals); on a machine
# with one, the CUDA part differs by design and only the rest is compared.
# Usage: backends_md_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
fresh=$(mktemp)
trap 'rm -f "$fresh" "$fresh.tmp"' EXIT
bash "$source/tools/gen_backends_md.sh" "$build" "$fresh" >/dev/null
without_cuda() { sed '/^<!-- cuda -->$/,/^<!-- \/cuda -->$/d' "$1"; }
if [ "$("$build/tools/c10d-backend-matrix" --cuda-devices)" -eq 0 ]; then
  without_cuda() { cat "$1"; }
fi
if ! diff -u <(without_cuda "$source/docs/backends.md") <(without_cuda "$fresh"); then
  echo "docs/backends.md is out of date: run tools/gen_backends_md.sh $build" >&2
  exit 1
fi
rows=$(grep -c '^| ' "$fresh")
echo "docs/backends.md matches this build ($rows table rows checked)"
