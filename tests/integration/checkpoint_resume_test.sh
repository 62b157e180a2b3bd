#!/usr/bin/env bash
# examples/checkpoint_resume as its header says, under c10drun or mpirun (mpi backend):
#   run 1, 4 ranks: 20 steps, saving at step 10;
#   run 2, 4 ranks: resumes from step 10 and must reach run 1's parameters bit for bit;
#   run 3, 3 ranks: resumes from step 10, and its loss at step 20 must be below step 10's;
#   run 4, 5 ranks: the same (a rank the saving job did not have).
# Usage: checkpoint_resume_test.sh c10drun|mpirun EXAMPLE LAUNCHER (EXAMPLE may be a command of
# several words: "python3 examples/python/checkpoint_resume.py")
set -uo pipefail
mode=$1 example=$2 launcher=$3
fail() { echo "FAIL: $*"; exit 1; }
root=$(mktemp -d /tmp/c10d-resume-XXXXXX)
trap 'rm -rf "$root"' EXIT
launch() {
  local ranks=$1; shift
  case $mode in
    c10drun) timeout 120 "$launcher" --nproc-per-node "$ranks" $example "$@" 2>&1 ;;
    mpirun) C10D_BACKEND=mpi timeout 120 bash "$launcher" "$ranks" $example "$@" 2>&1 ;;
    *) fail "mode '$mode': expected c10drun or mpirun" ;;
  esac
}
hash_of() { grep -o "rank 0 parameters [0-9a-f]*" <<<"$1" | awk '{print $4}'; }
loss_at() { grep -o "step $2 loss [0-9.]*" <<<"$1" | awk '{print $4}'; }

first=$(launch 4 --root "$root" --steps 20 --save-at 10) || { echo "$first"; fail "run 1"; }
[ -f "$root/step-10/metadata.json" ] || fail "run 1 saved no step-10"
second=$(launch 4 --root "$root" --steps 20 --resume) || { echo "$second"; fail "run 2"; }
third=$(launch 3 --root "$root" --steps 20 --resume) || { echo "$third"; fail "run 3"; }
fourth=$(launch 5 --root "$root" --steps 20 --resume) || { echo "$fourth"; fail "run 4"; }
grep -q "resumed from $root/step-10 at step 10 on 3 ranks" <<<"$third" || { echo "$third"; fail "run 3 did not resume"; }
h1=$(hash_of "$first") h2=$(hash_of "$second") h3=$(hash_of "$third")
echo "run 1 (4 ranks, 20 steps): parameters $h1, loss at 10 $(loss_at "$first" 10), at 20 $(loss_at "$first" 20)"
echo "run 2 (4 ranks, resumed):  parameters $h2, loss at 20 $(loss_at "$second" 20)"
echo "run 3 (3 ranks, resumed):  parameters $h3, loss at 11 $(loss_at "$third" 11), at 20 $(loss_at "$third" 20)"
echo "run 4 (5 ranks, resumed):  loss at 11 $(loss_at "$fourth" 11), at 20 $(loss_at "$fourth" 20)"
[ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "the resumed run's parameters differ from the uninterrupted run's"
awk -v a="$(loss_at "$third" 20)" -v b="$(loss_at "$first" 10)" 'BEGIN { exit !(a < b) }' ||
  fail "at 3 ranks the loss did not keep falling"
awk -v a="$(loss_at "$fourth" 20)" -v b="$(loss_at "$first" 10)" 'BEGIN { exit !(a < b) }' ||
  fail "at 5 ranks the loss did not keep falling"
echo "PASS: resumed at 4 ranks bit for bit, at 3 and 5 ranks with a falling loss ($mode)"
