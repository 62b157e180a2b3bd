#!/usr/bin/env bash
# An error that escapes a rank's main reaches the launcher's failure summary through
# TORCHELASTIC_ERROR_FILE, under c10drun and under torchrun (--no_python).
# Usage: error_file_test.sh C10DRUN FAILING_RANK PYTHON
set -uo pipefail
c10drun=$1
program=$2
python=$3
fail() { echo "FAIL: $*"; exit 1; }
expected="c10d::TimeoutError"

out=$(timeout 60 "$c10drun" --nproc-per-node 2 "$program" 2>&1)
rc=$?
[ "$rc" -ne 0 ] || fail "c10drun exited 0"
echo "$out" | grep -E "^c10drun: rank 1 (exited with code|killed by signal) .*: $expected: .*tag 77" \
  || { echo "$out"; fail "c10drun's summary lacks rank 1's error"; }
echo "c10drun: rank 1's error is in the summary"

# Error files c10drun did not write itself: a malformed escape must not crash it, and bytes that
# are not UTF-8 (written through the C API, from Python) come out replaced, not as broken JSON.
out=$(timeout 60 "$c10drun" --nproc-per-node 1 bash -c \
  'printf "{\"message\": \"cut short \\\\u12\"}" > "$TORCHELASTIC_ERROR_FILE"; exit 3' 2>&1)
echo "$out" | grep -q "^c10drun: rank 0 exited with code 3: cut short" \
  || { echo "$out"; fail "c10drun did not survive a malformed error file"; }
writer='import c10d, sys; c10d._capi.lib.c10d_write_error_file(b"bad \xff byte", None); sys.exit(5)'
out=$(timeout 60 "$c10drun" --nproc-per-node 1 "$python" -c "$writer" 2>&1)
echo "$out" | grep -q "^c10drun: rank 0 exited with code 5: bad ? byte" \
  || { echo "$out"; fail "c10drun's summary lacks the Python rank's error"; }
echo "c10drun: foreign and non-UTF-8 error files are shown"
pyrank=$(dirname "$0")/failing_rank.py
out=$(timeout 60 "$c10drun" --nproc-per-node 2 "$python" "$pyrank" 2>&1)
echo "$out" | grep -q "^c10drun: rank 1 exited with code 1: TimeoutError: .*failing_rank.py" \
  || { echo "$out"; fail "c10drun's summary lacks the Python rank's uncaught error"; }
echo "c10drun: a Python rank's uncaught error is in the summary"

if ! "$python" -c "import torch.distributed.run" 2>/dev/null; then
  echo "skipped torchrun: python3-torch is not installed (tools/setup.sh installs it)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$("$python" "$(dirname "$0")/../../support/free_port.py")
# --redirects 1 --tee 1: Debian's torchrun 1.13 crashes on Python 3.11 with its defaults.
out=$(cd "$work" && timeout 120 "$python" -m torch.distributed.run --nproc_per_node 2 \
  --master_port "$port" --no_python --redirects 1 --tee 1 --log_dir "$work/logs" "$program" 2>&1)
rc=$?
[ "$rc" -ne 0 ] || fail "torchrun exited 0"
echo "$out" | grep -q "$expected" || { echo "$out"; fail "torchrun's summary lacks the error"; }
echo "$out" | grep -q "tag 77" || { echo "$out"; fail "torchrun's summary lacks the op's details"; }
out=$(cd "$work" && timeout 120 "$python" -m torch.distributed.run --nproc_per_node 1 \
  --master_port "$port" --no_python --redirects 1 --tee 1 --log_dir "$work/logs2" \
  "$python" -c "$writer" 2>&1)
echo "$out" | grep -q "bad .* byte" || { echo "$out"; fail "torchrun could not read a non-UTF-8 error"; }
out=$(cd "$work" && timeout 120 "$python" -m torch.distributed.run --nproc_per_node 2 \
  --master_port "$port" --no_python --redirects 1 --tee 1 --log_dir "$work/logs3" \
  "$python" "$pyrank" 2>&1)
echo "$out" | grep -q "TimeoutError: .*tag 78" \
  || { echo "$out"; fail "torchrun's summary lacks the Python rank's uncaught error"; }
echo "PASS: the error reaches c10drun's and torchrun's summaries"
