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
# Every header the Doxyfile reads (cmake/ApiReference.cmake's list of the public ones) has its
# page.
headers=$(sed -n '/^INPUT /,/[^\\]$/p' "$build/docs/Doxyfile" | grep -o '[^ =]*\.h\(pp\)\?')
count=0
for header in $headers; do
  grep -q ">$(basename "$header")<" "$html/files.html" ||
    { echo "FAIL: files.html lists no ${header#"$source_dir"/}" >&2; exit 1; }
  count=$((count + 1))
done
[ "$count" -gt 0 ] || { echo "FAIL: no header in $build/docs/Doxyfile's INPUT" >&2; exit 1; }
# The parameters' lines reach the pages (Doxygen's "Parameters" tables), on the class and C pages.
for page in classc10d_1_1ProcessGroup.html group_8h.html; do
  grep -q 'class="params"' "$html/$page" ||
    { echo "FAIL: $page has no table of parameters" >&2; exit 1; }
done
echo "PASS: the API reference documents every public name of $count headers, no warning"
