#!/usr/bin/env bash
# Runs a command; passes only when it exits 0 AND its output matches PATTERN (grep -E). ctest's
# PASS_REGULAR_EXPRESSION alone would ignore the exit status.
# Usage: expect_output.sh PATTERN COMMAND [ARGS...]
set -uo pipefail
pattern=$1
shift
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ $status -ne 0 ]; then
  echo "expect_output: '$*' exited with $status" >&2
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$output"; then
  echo "expect_output: no line of the output matches '$pattern'" >&2
  exit 1
fi
