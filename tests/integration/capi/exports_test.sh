#!/usr/bin/env bash
# libc10d_c exports the C API and nothing else: every defined dynamic symbol is c10d_* under the
# version node C10D_C_1, every function the C API's headers declare (deprecated names too) is
# there, and the soname carries the C ABI's version (C10D_ABI_VERSION in common.h: additions raise
# only C10D_API_VERSION). Usage: exports_test.sh LIBRARY HEADER_FOLDER (c10d/capi)
set -euo pipefail
library=$1 headers=$2
exported=$(nm -D --defined-only "$library" | awk '{print $3}' | sort)
stray=$(echo "$exported" | grep -v -E '^(c10d_[a-z0-9_]+@@C10D_C_1|C10D_C_1)$' || true)
[ -z "$stray" ] || { echo "FAIL: $library exports more than the C API:"; echo "$stray"; exit 1; }
declared=$(cat "$headers"/*.h | tr '\n' ' ' | sed 's/C10D_DEPRECATED("[a-z0-9_]*") *//g' |
  grep -oE 'C10D_C_EXPORT [^(;]*\bc10d_[a-z0-9_]+\(' | grep -oE 'c10d_[a-z0-9_]+\($' | tr -d '(' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported" | sed 's/@@C10D_C_1$//' | sort -u))
[ -z "$missing" ] || { echo "FAIL: declared in $headers but not exported:"; echo "$missing"; exit 1; }
soname=$(readelf -d "$library" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
version=$(sed -n 's/^#define C10D_ABI_VERSION \([0-9]*\)/\1/p' "$headers/common.h")
[ -n "$version" ] && [ "$soname" = "libc10d_c.so.$version" ] || { echo "FAIL: soname $soname, C10D_ABI_VERSION $version"; exit 1; }
echo "PASS: $(echo "$declared" | wc -l) functions of $headers/*.h, nothing else, soname $soname"
