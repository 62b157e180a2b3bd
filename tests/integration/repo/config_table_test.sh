#!/usr/bin/env bash
# docs/configuration.md's table of C10D_* variables must be what c10d/core/Config.hpp declares: compares the
# lines between the config-table markers with `c10d-config --markdown`.
# Usage: tests/integration/repo/config_table_test.sh BUILD_DIR [--write]   (--write replaces the table)
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")/../../.." && pwd)
doc=$here/docs/configuration.md
table=$("$build/tools/c10d-config" --markdown)
begin='<!-- config-table'
end='<!-- /config-table -->'
grep -q "^$begin" "$doc" || { echo "FAIL: docs/configuration.md has no '$begin' marker"; exit 1; }
current=$(awk -v begin="$begin" -v end="$end" '
  index($0, end) == 1 { inside = 0 }
  inside
  index($0, begin) == 1 { inside = 1 }' "$doc")
if [ "${2:-}" = "--write" ]; then
  TABLE=$table awk -v begin="$begin" -v end="$end" '
    index($0, begin) == 1 { print; print ENVIRON["TABLE"]; skip = 1; next }
    index($0, end) == 1 { skip = 0 }
    !skip' "$doc" > "$doc.tmp"
  mv "$doc.tmp" "$doc"
  echo "wrote the table into $doc"
  exit 0
fi
# One reader: nothing but c10d/core/Config.hpp looks a C10D_ variable up itself.
readers=$(cd "$here" && grep -rn --include='*.cpp' --include='*.hpp' 'getenv("C10D_' \
  c10d store rpc backends tools examples benchmarks || true)
if [ -n "$readers" ]; then
  echo "FAIL: these read C10D_ variables around c10d/core/Config.hpp's reader:"
  echo "$readers"
  exit 1
fi
if [ "$current" != "$table" ]; then
  echo "FAIL: docs/configuration.md's table of variables differs from c10d/core/Config.hpp:"
  diff <(echo "$current") <(echo "$table") || true
  echo "run: bash tests/integration/repo/config_table_test.sh $build --write"
  exit 1
fi
echo "PASS: docs/configuration.md lists the $(echo "$table" | tail -n +3 | wc -l) variables of c10d/core/Config.hpp"
