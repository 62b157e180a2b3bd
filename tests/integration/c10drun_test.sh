#!/usr/bin/env bash
# End-to-end checks of the c10drun launcher with real runs of bash/coreutils ranks.
# Usage: c10drun_test.sh PATH_TO_C10DRUN
set -euo pipefail

if [[ $# -ne 1 || ! -x $1 ]]; then
  echo "usage: $0 PATH_TO_C10DRUN" >&2
  exit 2
fi
C10DRUN=$1
WORK=$(mktemp -d)
# Unique per run so that pgrep never mistakes another test's processes for survivors.
MARKER="c10drun-test-marker-$$-$RANDOM"
# Only the main shell may clean up: bash can run an inherited EXIT trap in a freshly forked
# subshell that gets killed before it has reset its traps.
MAIN_PID=$$
trap '[[ $BASHPID == "$MAIN_PID" ]] && rm -rf "$WORK"' EXIT

passed=0
failed=0

ok() {
  echo "ok - $1"
  passed=$((passed + 1))
}

not_ok() {
  echo "not ok - $1"
  shift
  for detail in "$@"; do echo "#   $detail"; done
  failed=$((failed + 1))
}

# Succeeds when no process carries the marker, waiting briefly because the kernel may take a
# moment to finish tearing down killed processes.
no_survivors() {
  local marker=$1
  for _ in $(seq 1 20); do
    pgrep -f -- "$marker" >/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# Whether PID is running (a zombie waiting for our `wait` does not count).
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $state != Z* ]]
}

# Waits until FILE has COUNT lines matching PATTERN (ranks reached their sleep).
wait_for_lines() {
  local file=$1 pattern=$2 count=$3
  for _ in $(seq 1 100); do
    [[ $(grep -c -- "$pattern" "$file" 2>/dev/null || true) -ge $count ]] && return 0
    sleep 0.1
  done
  return 1
}

# (1) Environment of 4 ranks and one prefixed line per rank.
rc=0
timeout 30 "$C10DRUN" --nproc-per-node 4 \
  bash -c 'echo "RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE" \
                "MASTER_PORT=$MASTER_PORT"' \
  >"$WORK/env.out" 2>"$WORK/env.err" || rc=$?
problems=()
[[ $rc -eq 0 ]] || problems+=("exit code $rc")
lines=$(wc -l <"$WORK/env.out")
[[ $lines -eq 4 ]] || problems+=("expected 4 lines, got $lines")
for r in 0 1 2 3; do
  n=$(grep -c -E "^\[rank $r\] RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 MASTER_PORT=[1-9][0-9]*$" \
        "$WORK/env.out" || true)
  [[ $n -eq 1 ]] || problems+=("rank $r: $n matching lines")
done
ports=$(sed -n 's/.*MASTER_PORT=//p' "$WORK/env.out" | sort -u)
[[ $(printf '%s\n' "$ports" | grep -c .) -eq 1 ]] || problems+=("ports differ: $ports")
if [[ ${#problems[@]} -eq 0 ]]; then
  ok "4 ranks get RANK/LOCAL_RANK/WORLD_SIZE and one shared MASTER_PORT ($ports)"
else
  not_ok "4 ranks get RANK/LOCAL_RANK/WORLD_SIZE and one shared MASTER_PORT" "${problems[@]}" \
    "output: $(cat "$WORK/env.out")"
fi

# (2) Options after PROGRAM belong to the program, even ones c10drun itself knows.
rc=0
out=$(timeout 30 "$C10DRUN" --nproc-per-node 1 bash -c 'echo "$@"' x --foo 1 --nnodes 7) || rc=$?
if [[ $rc -eq 0 && $out == "[rank 0] --foo 1 --nnodes 7" ]]; then
  ok "child flags are passed through untouched"
else
  not_ok "child flags are passed through untouched" "exit code $rc" "output: $out"
fi

# (3) A failing rank stops the others (and what they spawned) and sets the exit code.
marker3="$MARKER-fail"
rc=0
start=$SECONDS
timeout 30 "$C10DRUN" --nproc-per-node 3 bash -c \
  'if [[ $RANK == 1 ]]; then exit 3; fi; (exec -a "$0-sleep" sleep 60) & wait' "$marker3" \
  >"$WORK/fail.out" 2>"$WORK/fail.err" || rc=$?
elapsed=$((SECONDS - start))
problems=()
[[ $rc -eq 3 ]] || problems+=("exit code $rc, expected 3")
[[ $elapsed -le 10 ]] || problems+=("took ${elapsed}s")
grep -q "c10drun: rank 1 exited with code 3" "$WORK/fail.err" || problems+=("no failure message")
no_survivors "$marker3" || problems+=("survivors: $(pgrep -af -- "$marker3" || true)")
if [[ ${#problems[@]} -eq 0 ]]; then
  ok "rank exiting 3 stops the sleeping ranks and c10drun exits 3 (${elapsed}s)"
else
  not_ok "rank exiting 3 stops the sleeping ranks and c10drun exits 3" "${problems[@]}" \
    "stderr: $(cat "$WORK/fail.err")"
fi

# (4) SIGTERM to c10drun is forwarded and ends every rank.
marker4="$MARKER-term"
"$C10DRUN" --nproc-per-node 2 bash -c 'echo ready; (exec -a "$0-sleep" sleep 60) & wait' \
  "$marker4" >"$WORK/term.out" 2>"$WORK/term.err" &
launcher=$!
problems=()
wait_for_lines "$WORK/term.out" "ready" 2 || problems+=("ranks never became ready")
kill -TERM "$launcher" 2>/dev/null || true
# Polled rather than waited on, so that a launcher ignoring SIGTERM fails this check instead of
# hanging the script.
for _ in $(seq 1 200); do
  alive "$launcher" || break
  sleep 0.1
done
if alive "$launcher"; then
  problems+=("c10drun still running 20s after SIGTERM")
  kill -KILL "$launcher" || true
fi
rc=0
wait "$launcher" || rc=$?
[[ $rc -ne 0 ]] || problems+=("exit code 0")
no_survivors "$marker4" || problems+=("survivors: $(pgrep -af -- "$marker4" || true)")
if [[ ${#problems[@]} -eq 0 ]]; then
  ok "SIGTERM to c10drun ends all ranks, exit code $rc"
else
  not_ok "SIGTERM to c10drun ends all ranks" "${problems[@]}" "stderr: $(cat "$WORK/term.err")"
fi

# (5) A program that cannot be executed.
rc=0
timeout 30 "$C10DRUN" --nproc-per-node 2 "/nonexistent/$MARKER" >/dev/null 2>"$WORK/exec.err" \
  || rc=$?
if [[ $rc -eq 127 ]] && grep -q "cannot run '/nonexistent/$MARKER'" "$WORK/exec.err"; then
  ok "unknown program gives exit 127"
else
  not_ok "unknown program gives exit 127" "exit code $rc" "stderr: $(cat "$WORK/exec.err")"
fi

# (6) Bad arguments.
rc=0
timeout 30 "$C10DRUN" --nproc-per-node 0 true >/dev/null 2>"$WORK/args.err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q "^c10drun: error: " "$WORK/args.err"; then
  ok "--nproc-per-node 0 gives exit 2"
else
  not_ok "--nproc-per-node 0 gives exit 2" "exit code $rc" "stderr: $(cat "$WORK/args.err")"
fi

# (6b) A bad C10D_* value is refused once, at launch, naming the variable, before any rank starts.
rc=0
C10D_GLOO_FAST_PATH=sometimes timeout 30 "$C10DRUN" --nproc-per-node 2 \
  bash -c "touch $WORK/started.\$RANK" >/dev/null 2>"$WORK/config.err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q "C10D_GLOO_FAST_PATH='sometimes' (environment): expected" \
     "$WORK/config.err" && ! ls "$WORK"/started.* >/dev/null 2>&1; then
  ok "a bad C10D_GLOO_FAST_PATH gives exit 2 before any rank starts"
else
  not_ok "a bad C10D_GLOO_FAST_PATH gives exit 2 before any rank starts" "exit code $rc" \
    "stderr: $(cat "$WORK/config.err")"
fi

# (7) Child stderr goes to stderr, prefixed, and a last line without newline is not lost.
rc=0
timeout 30 "$C10DRUN" --nproc-per-node 2 bash -c 'echo "to err $RANK" >&2; printf "tail $RANK"' \
  >"$WORK/streams.out" 2>"$WORK/streams.err" || rc=$?
if [[ $rc -eq 0 ]] && grep -qx "\[rank 1\] to err 1" "$WORK/streams.err" &&
   grep -qx "\[rank 0\] tail 0" "$WORK/streams.out" &&
   grep -qx "\[rank 1\] tail 1" "$WORK/streams.out" &&
   ! grep -q "to err" "$WORK/streams.out"; then
  ok "child stderr is prefixed on stderr and partial last lines are flushed"
else
  not_ok "child stderr is prefixed on stderr and partial last lines are flushed" "exit code $rc" \
    "stdout: $(cat "$WORK/streams.out")" "stderr: $(cat "$WORK/streams.err")"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
