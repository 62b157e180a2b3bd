#!/usr/bin/env bash
# examples/elastic_train under c10drun --elastic, with real SIGKILLs of launched ranks:
#   1. one rank, drawn at random, killed mid-run: the launcher exits 0, the 3 survivors reach the
#      last step with one parameter hash, their pids are the ones they started with, and the
#      launcher's summary names the lost rank;
#   2. rank 0 (which hosted the store before the launcher did) and rank 3 at once: 2 go on;
#   3. a kill below --min-size: every survivor fails naming the lost id, the launcher fails;
#   4. --max-restarts: a killed rank is started again, joins, receives the parameters, and all 4
#      reach the last step with one hash; the 3 others keep their pids; twice in one run;
#   5. --count-samples through three kills, each followed by the rank's restart and rejoin: every
#      rank counts each sample's uses in committed steps (replicated, healed state) and finds
#      every sample used exactly once per epoch;
#   6. C10D_BACKEND=nosuchbackend: every rank names the backend (none dies of a reset store).
# Usage: elastic_train_test.sh EXAMPLE C10DRUN (EXAMPLE may be a command of several words:
# "python3 examples/python/elastic_train.py")
set -uo pipefail
example=$1 launcher=$2
fail() { echo "FAIL: $*"; exit 1; }
out=$(mktemp /tmp/c10d-elastic-XXXXXX)
trap 'rm -f "$out"; [ -n "${job:-}" ] && kill -9 "$job" 2>/dev/null' EXIT

# Starts the job in the background; returns once every rank printed its pid. Steps: long enough
# (about 3 s) that a kill 0.5 s in lands mid-run; cases 4 and 5, with their rejoins, take 1500.
steps=600
start() {
  : >"$out"
  timeout 120 "$launcher" --elastic ${restarts:+--max-restarts $restarts} --nproc-per-node 4 \
    $example --steps "$steps" "$@" >"$out" 2>&1 &
  job=$!
  for _ in $(seq 1 300); do
    [ "$(grep -c '\] start id' "$out")" -eq 4 ] && return
    sleep 0.05
  done
  cat "$out"; fail "the ranks did not start"
}
# SIGKILLs id's current process once the job ran SECONDS more, then waits (up to 20 s) until N
# restarted processes in all have joined.
kill_and_await_joins() {
  local seconds=$1 id=$2 n=$3 what=$4
  sleep "$seconds"
  kill -9 "$(pid_of "$id")"
  for _ in $(seq 1 400); do
    [ "$(grep -c 'restarted) joined' "$out")" -ge "$n" ] && return
    sleep 0.05
  done
  cat "$out"; fail "$what: id $id did not rejoin (join $n)"
}
pid_of() { grep "\] start id $1 pid" "$out" | tail -1 | awk '{print $NF}'; }
first_pid_of() { grep "\] start id $1 pid" "$out" | head -1 | awk '{print $NF}'; }
finish() { wait "$job"; code=$?; job=; }

# Survivors: each printed "done id I pid P ... step 1500 ... hash H" with its start pid.
check_survivors() {
  local expected=$1 hashes
  [ "$(grep -c '\] done id' "$out")" -eq "$expected" ] || { cat "$out"; fail "expected $expected survivors"; }
  hashes=$(grep '\] done id' "$out" | grep -o 'hash [0-9a-f]*' | sort -u | wc -l)
  [ "$hashes" -eq 1 ] || { cat "$out"; fail "the survivors' parameters differ"; }
  grep '\] done id' "$out" | grep -q -v "step $steps " && { cat "$out"; fail "a survivor stopped early"; }
  while read -r id pid; do
    [ "$id" = "${2:-none}" ] && continue  # the restarted one
    [ "$(first_pid_of "$id")" = "$pid" ] || { cat "$out"; fail "id $id was restarted ($pid)"; }
  done < <(grep '\] done id' "$out" | awk '{print $5, $7}')
}

# 1. One random rank.
victim=$((RANDOM % 4))
start
sleep 0.5
kill -9 "$(pid_of $victim)"
finish
[ "$code" -eq 0 ] || { cat "$out"; fail "case 1: the launcher exited $code"; }
check_survivors 3
grep -q "rank $victim lost: killed by signal SIGKILL" "$out" || { cat "$out"; fail "case 1: no summary"; }
grep -q "without \[$victim\]" "$out" || { cat "$out"; fail "case 1: no re-formation without $victim"; }
echo "case 1: rank $victim killed; $(grep -m1 're-formed in' "$out")"

# 2. Rank 0 and rank 3 at once.
start
sleep 0.5
kill -9 "$(pid_of 0)" "$(pid_of 3)"
finish
[ "$code" -eq 0 ] || { cat "$out"; fail "case 2: the launcher exited $code"; }
check_survivors 2
grep -q "members \[1,2\]" "$out" || { cat "$out"; fail "case 2: members are not 1 and 2"; }
echo "case 2: ranks 0 and 3 killed; $(grep -m1 're-formed in' "$out")"

# 3. Below the minimum size.
start --min-size 4
sleep 0.5
kill -9 "$(pid_of 1)"
finish
[ "$code" -ne 0 ] || { cat "$out"; fail "case 3: the launcher exited 0 below the minimum size"; }
[ "$(grep -c 'lost 1), fewer than ElasticOptions::minSize 4' "$out")" -eq 3 ] ||
  { cat "$out"; fail "case 3: not every survivor named the lost id"; }
echo "case 3: every survivor said: $(grep -m1 -o '3 member(s) left.*' "$out")"

# 4. Restarts: rank 2 killed twice; each time it comes back and joins.
steps=1500
restarts=2 start
for round in 1 2; do kill_and_await_joins 0.5 2 "$round" "case 4"; done
finish
[ "$code" -eq 0 ] || { cat "$out"; fail "case 4: the launcher exited $code"; }
check_survivors 4 2
grep '\] done id' "$out" | grep -q -v 'size 4 ' && { cat "$out"; fail "case 4: the group did not grow back to 4"; }
[ "$(grep -c 's: rank 2 restarted (. of 2)' "$out")" -eq 2 ] || { cat "$out"; fail "case 4: no restarts in the summary"; }
echo "case 4: rank 2 killed twice, restarted and rejoined: $(grep -m1 'joined generation' "$out")"
unset restarts

# 5. Exactly once: three kills (ranks 1, 2, 3), each rank restarted once and rejoining.
restarts=1 start --count-samples
joins=0
for victim in 1 2 3; do
  joins=$((joins + 1))
  kill_and_await_joins 0.4 "$victim" "$joins" "case 5"
done
finish
[ "$code" -eq 0 ] || { cat "$out"; fail "case 5: the launcher exited $code"; }
[ "$(grep -c ': exactly once per epoch: 0 of' "$out")" -eq 4 ] ||
  { cat "$out"; fail "case 5: samples not used exactly once per epoch on every rank"; }
[ "$(grep '\] done id' "$out" | grep -o 'hash [0-9a-f]*' | sort -u | wc -l)" -eq 1 ] ||
  { cat "$out"; fail "case 5: the ranks' parameters differ"; }
echo "case 5: 3 kills and 3 rejoins; $(grep -m1 'exactly once per epoch' "$out")"
unset restarts

# 6. A backend no rank has: every rank says so before touching the store.
# --elastic, so that the first rank to fail does not stop the others before they speak.
C10D_BACKEND=nosuchbackend timeout 60 "$launcher" --elastic --nproc-per-node 3 $example >"$out" 2>&1
[ "$(grep -c "unknown backend 'nosuchbackend'" "$out")" -ge 3 ] || { cat "$out"; fail "case 4"; }
grep -qi "reset by peer\|closed the connection" "$out" && { cat "$out"; fail "case 4: a rank died of the store"; }
echo "PASS: elastic_train survived kills of one rank and of two, failed below its minimum size, took a twice-restarted rank back, used every sample exactly once per epoch through 3 kills and rejoins, and every rank named an unknown backend"
