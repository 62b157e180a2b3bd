#!/usr/bin/env bash
# examples/elastic_train under c10drun with SIGKILLs at chosen points (--die-at makes a rank kill
# itself there, so the point is exact), under chaos, and of the launcher itself:
#   1. during a reduction and 2. during the optimizer step: the rank is restarted, rejoins, and
#      every rank finds every sample used exactly once per epoch, with one parameter hash;
#   3. during a checkpoint save: that checkpoint is left incomplete, the survivors go on, and
#      each loads the newest complete checkpoint at the end;
#   4. chaos: a random rank SIGKILLed every 0.7 s and restarted: the ranks that finish agree on
#      the parameters and on every sample used exactly once per epoch;
#   5. the launcher SIGKILLed: no rank outlives it (they must not train on as orphans);
#   6. a rank stopped (SIGSTOP) past the group's timeout: the others go on without it; resumed,
#      it learns it was left out and ends, and its restart rejoins.
# Usage: elastic_faults_test.sh ELASTIC_TRAIN C10DRUN
set -uo pipefail
example=$1 launcher=$2
fail() { echo "FAIL: $*"; exit 1; }
out=$(mktemp /tmp/c10d-elastic-faults-XXXXXX)
ckpt=$(mktemp -d /tmp/c10d-elastic-ckpt-XXXXXX)
trap 'rm -rf "$out" "$ckpt"; [ -n "${job:-}" ] && kill -9 "$job" 2>/dev/null' EXIT

run() {  # run [launcher flags] -- [example flags]
  local flags=()
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  timeout 120 "$launcher" "${flags[@]}" --nproc-per-node 4 "$example" "$@" >"$out" 2>&1
  code=$?
}
expect_agreement() {  # every finished rank used each sample once per epoch; one hash
  local what=$1 finished
  finished=$(grep -c '\] done id' "$out")
  [ "$code" -eq 0 ] || { cat "$out"; fail "$what: the launcher exited $code"; }
  [ "$finished" -ge "${2:-4}" ] || { cat "$out"; fail "$what: $finished rank(s) finished"; }
  [ "$(grep -c ': exactly once per epoch: 0 of' "$out")" -eq "$finished" ] ||
    { cat "$out"; fail "$what: samples not used exactly once per epoch on every rank"; }
  [ "$(grep '\] done id' "$out" | grep -o 'hash [0-9a-f]*' | sort -u | wc -l)" -eq 1 ] ||
    { cat "$out"; fail "$what: the ranks' parameters differ"; }
}

# 1, 2. During a reduction, during the optimizer step.
for phase in reduce optimizer; do
  run --max-restarts 1 -- --steps 600 --count-samples --die-at "1:$phase:200"
  grep -q "id 1: dying in $phase at step 200" "$out" || { cat "$out"; fail "$phase: no death"; }
  grep -q "id 1 (restarted) joined" "$out" || { cat "$out"; fail "$phase: no rejoin"; }
  expect_agreement "$phase"
  echo "case $phase: $(grep -m1 'dying in' "$out" | sed 's/^\[rank [0-9]\] //'); $(grep -m1 'restarted) joined' "$out" | sed 's/^\[rank [0-9]\] //')"
done

# 3. During a checkpoint save.
run --elastic -- --steps 400 --checkpoint-dir "$ckpt" --checkpoint-every 50 --die-at 2:checkpoint:150
[ "$code" -eq 0 ] || { cat "$out"; fail "checkpoint: the launcher exited $code"; }
[ "$(grep -c 'the checkpoint of step 150 failed' "$out")" -eq 3 ] ||
  { cat "$out"; fail "checkpoint: not every survivor saw the save at step 150 fail"; }
[ -d "$ckpt/step-150" ] && { cat "$out"; fail "checkpoint: step 150 committed although a rank died saving it"; }
[ -d "$ckpt/step-200" ] || { cat "$out"; fail "checkpoint: no checkpoint after the loss"; }
[ "$(grep -c "loaded the newest complete checkpoint $ckpt/step-400 (step 400)" "$out")" -eq 3 ] ||
  { cat "$out"; fail "checkpoint: the survivors did not load step 400"; }
echo "case checkpoint: a rank died saving step 150; saved since: $(ls "$ckpt" | tr '\n' ' ')"

# 4. Chaos.
run --max-restarts 20 --chaos-kill-every 0.7 -- --steps 1500 --count-samples
expect_agreement chaos 2
kills=$(grep -c 'chaos: SIGKILL to rank' "$out")
[ "$kills" -ge 3 ] || { cat "$out"; fail "chaos: only $kills kill(s)"; }
echo "case chaos: $kills kills; $(grep -m1 'summary' "$out" | sed 's/^c10drun: //')"

# 5. The launcher itself.
: >"$out"
"$launcher" --elastic --nproc-per-node 4 "$example" --steps 100000 >"$out" 2>&1 &
job=$!
for _ in $(seq 1 300); do
  [ "$(grep -c '\] start id' "$out")" -eq 4 ] && break
  sleep 0.05
done
pids=$(grep '\] start id' "$out" | awk '{print $NF}')
[ "$(echo "$pids" | wc -w)" -eq 4 ] || { cat "$out"; fail "launcher: the ranks did not start"; }
kill -9 "$job"
wait "$job" 2>/dev/null
job=
for _ in $(seq 1 100); do
  alive=0
  for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
  [ "$alive" -eq 0 ] && break
  sleep 0.05
done
[ "$alive" -eq 0 ] || { kill -9 $pids 2>/dev/null; fail "launcher: $alive rank(s) outlived the launcher by 5 s"; }
echo "case launcher: every rank ended with the SIGKILLed launcher"
# 6. A stalled rank.
: >"$out"
C10D_TIMEOUT=2 timeout 120 "$launcher" --max-restarts 1 --nproc-per-node 4 "$example" \
  --steps 3000 --count-samples --join-timeout-ms 1000 >"$out" 2>&1 &
job=$!
for _ in $(seq 1 300); do
  [ "$(grep -c '\] start id' "$out")" -eq 4 ] && break
  sleep 0.05
done
sleep 0.5
stalled=$(grep '\] start id 2 pid' "$out" | awk '{print $NF}')
kill -STOP "$stalled"
sleep 4
kill -CONT "$stalled"
wait "$job"
code=$?
job=
expect_agreement stall
grep -q "id 2 was left out of generation" "$out" || { cat "$out"; fail "stall: id 2 was not told it was left out"; }
grep -q "id 2 (restarted) joined" "$out" || { cat "$out"; fail "stall: id 2 did not rejoin"; }
echo "case stall: $(grep -m1 -o 'id 2 was left out of generation [0-9]* ([^)]*)' "$out"); $(grep -m1 'id 2 (restarted) joined' "$out" | sed 's/^\[rank [0-9]\] //')"
echo "PASS: elastic_train survived kills during a reduction, an optimizer step and a checkpoint save, and chaos, with every sample used exactly once; no rank outlived its launcher; a stalled rank was left out and rejoined"
