#!/usr/bin/env bash
# c10d-checkpoint as a user runs it, on checkpoints a 2-rank job saved: latest, inspect, verify
# (sound, a flipped byte, a missing file), and consolidate, whose output a plain safetensors
# reader (Python's json and struct, by the format's definition) reads back with the right values.
# Usage: checkpoint_tool_test.sh TOOL SAVE_LOOP C10DRUN PYTHON
set -uo pipefail
tool=$1 program=$2 launcher=$3 python=$4
fail() { echo "FAIL: $*"; exit 1; }
root=$(mktemp -d /tmp/c10d-ckpt-tool-XXXXXX)
trap 'rm -rf "$root"' EXIT
timeout 30 "$launcher" --nproc-per-node 2 "$program" save "$root/ckpt" >/dev/null 2>&1 &
job=$!
# Until two checkpoints are complete (however slow the disk), then kill the job.
for _ in $(seq 1 300); do
  [ "$(ls "$root/ckpt" 2>/dev/null | grep -c '^step-[0-9]*$')" -ge 2 ] && break
  sleep 0.1
done
pkill -9 -f "$program save $root" ; wait "$job"

newest=$("$tool" latest "$root/ckpt") || fail "latest found no checkpoint"
step=${newest##*step-}
echo "latest: $newest"
out=$("$tool" inspect "$newest") || fail "inspect exited $?"
echo "$out" | head -12
grep -q "by 2 ranks" <<<"$out" || fail "inspect does not say the world size"
grep -q "^  step $step\$" <<<"$out" || fail "inspect does not give the step"
grep -q "^  w  float32\[2048, 512\]  4.0 MiB  2 slices" <<<"$out" || fail "inspect does not list w's slices"
grep -q "shared  float32\[262144\]  1.0 MiB  1 slice" <<<"$out" || fail "the replicated tensor is not saved once"
"$tool" verify "$newest" | grep -q ": ok (2 tensors" || fail "verify of a sound checkpoint"

"$tool" consolidate "$newest" "$root/model.safetensors" || fail "consolidate exited $?"
"$python" - "$root/model.safetensors" "$step" <<'PY' || fail "the consolidated file does not read back"
import json, struct, sys, array
data = open(sys.argv[1], "rb").read()
step = int(sys.argv[2])
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
assert header["__metadata__"]["step"] == str(step), header["__metadata__"]
w = header["w"]
assert w["dtype"] == "F32" and w["shape"] == [2048, 512], w
begin, end = w["data_offsets"]
values = array.array("f", data[8 + n + begin:8 + n + end])
for k in (0, 1, 4095, 524288, 1048575):
    want = float(step * 1000003 + k % 65521)
    assert values[k] == array.array("f", [want])[0], (k, values[k], want)
print("consolidated: w and shared read back by a plain reader, step", step)
PY

# Damage: one flipped byte in rank 1's file, then rank 0's file gone.
file1=$newest/rank-00001.safetensors
size=$(stat -c %s "$file1")
byte=$(od -An -tu1 -j $((size - 100)) -N1 "$file1" | tr -d ' ')
printf "\\$(printf '%03o' $((byte ^ 0x55)))" | dd of="$file1" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
out=$("$tool" verify "$newest" 2>&1); code=$?
echo "$out"
[ "$code" -eq 1 ] || fail "verify of a flipped byte exited $code"
grep -q "of file '$file1' do not match their checksum" <<<"$out" || fail "verify does not name the file"
rm "$newest/rank-00000.safetensors"
out=$("$tool" verify "$newest" 2>&1); code=$?
[ "$code" -eq 1 ] || fail "verify of a missing file exited $code"
grep -q "rank-00000.safetensors' is missing" <<<"$out" || fail "verify does not name the missing file: $out"
out=$("$tool" inspect "$root/nothing" 2>&1); code=$?
[ "$code" -eq 1 ] && grep -q "no such folder" <<<"$out" || fail "inspect of no checkpoint: $code $out"
echo "PASS: c10d-checkpoint latest, inspect, verify, consolidate"
