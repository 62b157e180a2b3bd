#!/usr/bin/env bash
# docs/tuning.md lists the tuning constants: each named constant (`kName`, `Class::kName`) must
# still exist in the file the table gives for it, so the list cannot silently go stale.
set -euo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
table=$here/docs/tuning.md
checked=0
failed=0
while IFS='|' read -r _ constant _ where _; do
  name=$(grep -o '`[A-Za-z_:]*k[A-Z][A-Za-z]*`' <<<"$constant" | head -1 | tr -d '`') || true
  [ -n "$name" ] || continue
  name=${name##*::}
  file=$(echo "$where" | sed 's/^ *//; s/[ ;,].*//')
  if [ ! -f "$here/$file" ] || ! grep -q "\b$name\b" "$here/$file"; then
    echo "FAIL: docs/tuning.md says $name is in $file, which has no such name"
    failed=$((failed + 1))
  fi
  checked=$((checked + 1))
done < <(grep '^| `' "$table")
[ "$checked" -ge 20 ] || { echo "FAIL: only $checked named constants found in docs/tuning.md"; exit 1; }
[ "$failed" -eq 0 ] || exit 1
echo "PASS: the $checked named constants of docs/tuning.md are where it says"
