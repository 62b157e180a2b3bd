#!/usr/bin/env bash
# The API reference builds from the public headers with no Doxygen warning: every public class,
# function, parameter and return value documented; and it holds a page for each header and the
# main classes. Usage: api_reference_test.sh BUILD_DIR
set -euo pipefail
build=$1
command -v doxygen >/dev/null || { echo "FAIL: doxygen not found; run tools/setup.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The configured Doxyfile, into a folder of this run's own.
{ cat "$build/docs/Doxyfile"; echo "OUTPUT_DIRECTORY = $out"; echo "WARN_LOGFILE = $out/warnings.txt"; } \
  > "$out/Doxyfile"
source_dir=$(cd "$(dirname "$0")/../../.." && pwd)
if ! (cd "$source_dir" && doxygen "$out/Doxyfile") || [ -s "$out/warnings.txt" ]; then
  echo "FAIL: Doxygen warned ($(grep -c ': \(warning\|error\):' "$out/warnings.txt" || true)" \
    "warnings); document these:" >&2
  cat "$out/warnings.txt" >&2
  exit 1
fi
html=$out/html
for page in index.html classc10d_1_1ProcessGroup.html classc10d_1_1Work.html \
  classc10d_1_1Store.html classc10d_1_1Error.html classc10d_1_1rpc_1_1RpcAgent.html; do
  [ -s "$html/$page" ] || { echo "FAIL: the reference has no $page" >&2; exit 1; }
done
# Every public header has its page, under its include path.
printf 'include(%s/cmake/PublicHeaders.cmake)\nforeach(h ${C10D_PUBLIC_HEADERS} ${C10D_PUBLIC_MPI_HEADERS} ${C10D_PUBLIC_NCCL_HEADERS})\nmessage("${h}")\nendforeach()\n' \
  "$source_dir" > "$out/headers.cmake"
headers=$(cmake -P "$out/headers.cmake" 2>&1)
count=0
for header in $headers; do
  grep -q ">$header<\|>$(basename "$header")<" "$html/files.html" ||
    { echo "FAIL: files.html lists no $header" >&2; exit 1; }
  count=$((count + 1))
done
# The parameters' lines reach the pages (Doxygen's "Parameters" tables), on the class and C pages.
for page in classc10d_1_1ProcessGroup.html group_8h.html; do
  grep -q 'class="params"' "$html/$page" ||
    { echo "FAIL: $page has no table of parameters" >&2; exit 1; }
done
echo "PASS: the API reference documents every public name of $count headers, no warning"
