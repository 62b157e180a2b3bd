#!/usr/bin/env bash
# Three hosts simulated with network namespaces: h0, h1 and h2 each reach a bridge in a fourth
# namespace (the switch) through a veth pair, at 10.213.0.1-3. A job of 2 ranks per host
# (c10drun --nnodes 3 in each namespace, MASTER_ADDR on h0) runs the tutorial examples over
# real routed TCP (ranks of one host on shared memory), and every collective with and without
# the hierarchical path; then a looping allreduce job has h2's switch port cut mid-run
# (ip link set ... down), and every host's launcher must end with an error, not hang; last, an
# elastic job (examples/elastic_train under c10drun --elastic) has h2's link cut, and h0's and
# h1's ranks re-form without h2's and finish, with one hash and every sample used once; then h2's
# launcher is SIGKILLed and started again: its ranks die with it, the others go on, and the new
# launcher's ranks rejoin and finish with them.
# Exits 77 (ctest: skipped) with the reason where namespaces cannot be made (not root, no ip).
# Usage: multi_host_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
c10drun=$build/tools/c10drun
tag=c$$  # keeps concurrent runs' namespaces and links apart
subnet=10.213.0
port=29517
logs=$(mktemp -d)
source "$(dirname "$0")/hosts.sh"

cleanup() {
  netns_hosts_down
  rm -rf "$logs"
}
trap cleanup EXIT

skip() {
  echo "SKIPPED: $*; this test needs root and iproute2 to make network namespaces"
  exit 77
}
netns_hosts_up "$tag" "$subnet" 3 2>"$logs/err" || skip "$(cat "$logs/err")"
echo "hosts: ${hosts[*]} at $subnet.1-3, joined by a bridge in $switch"

failures=0
# Runs PROGRAM ARGS as a 6-rank job (2 ranks on each host); sets job_pids to the launchers.
start_job() {
  local name=$1
  shift
  job_pids=()
  for i in 0 1 2; do
    ip netns exec "${hosts[$i]}" "$c10drun" --nnodes 3 --node-rank "$i" --nproc-per-node 2 \
      --master-addr "$subnet.1" --master-port "$port" "$@" >"$logs/$name.h$i" 2>&1 &
    job_pids+=($!)
  done
  port=$((port + 1))
}

# Brings h$1's link back, and waits (at most 10 s) until it and every other host resolve each
# other's addresses again: a job started while the neighbour entries the cut left FAILED are still
# there gets "No route to host" at its first connect (seen once in CI).
link_up() {
  local i=$1 j deadline=$((SECONDS + 10))
  ip -n "$switch" link set "${tag}b$i" up
  for j in 0 1 2; do ip -n "${hosts[$j]}" neigh flush all 2>/dev/null || true; done
  for j in 0 1 2; do
    [ "$j" = "$i" ] && continue
    for pair in "$i $j" "$j $i"; do
      set -- $pair
      # A datagram to the discard port makes the kernel resolve the address; the entry is
      # REACHABLE once the peer answered.
      until ip netns exec "${hosts[$1]}" bash -c "echo > /dev/udp/$subnet.$(($2 + 1))/9" 2>/dev/null &&
        ip -n "${hosts[$1]}" neigh show "$subnet.$(($2 + 1))" | grep -qE 'REACHABLE|STALE|DELAY'; do
        if [ $SECONDS -ge $deadline ]; then
          echo "FAIL: h$1 does not reach h$2 10 s after h$i's link came back"
          failures=$((failures + 1))
          return 1
        fi
        sleep 0.1
      done
    done
  done
}

# Waits for the launchers of the current job for at most $1 seconds; codes[i] gets each exit
# code (124 for one still running at the end, which is then killed).
wait_job() {
  local deadline=$((SECONDS + $1))
  codes=()
  for i in 0 1 2; do
    while kill -0 "${job_pids[$i]}" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -0 "${job_pids[$i]}" 2>/dev/null; then
      kill -9 "${job_pids[$i]}" 2>/dev/null
      wait "${job_pids[$i]}" 2>/dev/null
      codes[$i]=124
    else
      wait "${job_pids[$i]}"
      codes[$i]=$?
    fi
  done
}

# Each wait is bounded so that the worst case (5 x 60 + 4 + 60 + 4 + 90 + 8 + 90 s) stays under
# ctest's 600 s.
export C10D_TIMEOUT=20
for example in p2p_send_recv p2p_isend_irecv allreduce_subgroup collectives_tour sync_sgd; do
  start_job "$example" "$build/examples/$example"
  wait_job 60
  if [ "${codes[*]}" = "0 0 0" ]; then
    echo "PASS $example: 6 ranks on 3 hosts; $(grep -c . "$logs/$example.h0") lines from h0, e.g.:"
    grep -m 2 "^\[rank 0\]" "$logs/$example.h0" | sed 's/^/    /'
  else
    echo "FAIL $example: launcher exit codes ${codes[*]}"
    cat "$logs/$example".h* | sed 's/^/    /'
    failures=$((failures + 1))
  fi
done

# Hierarchical collectives: every op of c10d-comm-bench, each size's result checked (it exits 3 on
# a wrong element), from 4 B to 4 MiB with the root on rank 3 (h1's second rank, not its host's
# lowest): hierarchical (within each host over shared memory, then among one rank per host over
# TCP), flat, and the automatic choice, which here is flat (hosts in rank order: flat recursive
# doubling crosses hosts as few times as the hierarchical one). The log line says which ran.
for hier in 1 0 auto; do
  case $hier in
    1) path="are hierarchical (C10D_GLOO_HIERARCHICAL=1;" ;;
    0) path="are flat over every rank (C10D_GLOO_HIERARCHICAL=0 on some rank;" ;;
    auto) path="are flat over every rank (auto; their messages cross hosts 3 times in turn hierarchical, 3 flat)" ;;
  esac
  # Six ranks on this machine's cores: each "host" thinks it has a core per rank, so spinning is
  # turned off, as it would be on a host with fewer cores than ranks.
  export C10D_GLOO_HIERARCHICAL=$hier C10D_LOG_LEVEL=INFO C10D_GLOO_BUSY_POLL=0
  start_job "hier$hier" "$build/benchmarks/c10d-comm-bench" --op all -b 4 -e 4M -f 16 -r 3 -n 5 -w 1
  wait_job 60
  unset C10D_GLOO_HIERARCHICAL C10D_LOG_LEVEL C10D_GLOO_BUSY_POLL
  if [ "${codes[*]}" = "0 0 0" ] &&
     grep -qF "rank 0: 3 hosts (this one: rank(s) 0, 1); allreduce, broadcast, reduce, allgather and reduce_scatter $path" "$logs/hier$hier.h0"; then
    echo "PASS C10D_GLOO_HIERARCHICAL=$hier: every op exact on 3 hosts x 2 ranks, root rank 3;" \
      "they $path ...; allreduce time at 4 B, 256 KiB, 4 MiB:" \
      "$(grep -E '^\[rank 0\] +(4|262144|4194304) .* sum ' "$logs/hier$hier.h0" | head -n 3 | awk '{printf "%s ", $8}')us;" \
      "allgather, reduce_scatter at about 256 KiB (their last size below 2 MiB, which ranks that" \
      "sleep in reads leave to Gloo's own algorithms):" \
      "$(awk '/# op: /{op=$5} $3 ~ /^[0-9]+$/ && $3 < 2097152 {last[op]=$8} END {printf "%s %s ", last["allgather"], last["reduce_scatter"]}' "$logs/hier$hier.h0")us"
  else
    echo "FAIL C10D_GLOO_HIERARCHICAL=$hier: launcher exit codes ${codes[*]}, or no log line saying the ops $path"
    grep -v " W " "$logs/hier$hier".h* | tail -40 | sed 's/^/    /'
    failures=$((failures + 1))
  fi
done

# The link cut: ranks 4 and 5 (on h2) lose the network in the middle of a loop of allreduces.
export C10D_TIMEOUT=10
start_job linkcut "$build/tests/fault_rank" --iters 1000000 --pause-ms 2
sleep 4
for i in 0 1 2; do
  kill -0 "${job_pids[$i]}" 2>/dev/null || { echo "FAIL linkcut: h$i's job ended before the cut"; failures=$((failures + 1)); }
done
echo "cutting h2's link: ip -n $switch link set ${tag}b2 down"
cut_at=$SECONDS
ip -n "$switch" link set "${tag}b2" down
wait_job 60
echo "launchers ended ${codes[*]} within $((SECONDS - cut_at)) s of the cut (C10D_TIMEOUT=10)"
for i in 0 1 2; do
  reported=$(grep -c "allreduce #[0-9]* failed after" "$logs/linkcut.h$i")
  if [ "${codes[$i]}" -eq 124 ]; then
    echo "FAIL linkcut: h$i's job still ran 60 s after the cut (hang)"
    failures=$((failures + 1))
  elif [ "${codes[$i]}" -eq 0 ]; then
    echo "FAIL linkcut: h$i's job exited 0 although its allreduces could not complete"
    failures=$((failures + 1))
  elif [ "$reported" -eq 0 ]; then
    echo "FAIL linkcut: h$i's job exited ${codes[$i]} without an error from an allreduce"
    failures=$((failures + 1))
  else
    echo "PASS linkcut h$i: exit ${codes[$i]}; $(grep -m 1 "allreduce #[0-9]* failed after" "$logs/linkcut.h$i" | cut -c1-300)"
  fi
done
[ $failures -eq 0 ] || { echo "linkcut logs:"; cat "$logs"/linkcut.h* | grep -v " W " | tail -40 | sed 's/^/    /'; }

# The elastic link cut: h2's ranks (ids 4 and 5) are cut off mid-run. The others time out
# (C10D_TIMEOUT=3), wait --join-timeout-ms for them (their launcher cannot record anything), form
# a generation of 4 and finish; h2's ranks fail on the unreachable store, and its launcher ends.
export C10D_TIMEOUT=3
link_up 2  # cut by the case before
start_job elastic --elastic "$build/examples/elastic_train" --steps 1500 --count-samples \
  --join-timeout-ms 2000
sleep 4
ip -n "$switch" link set "${tag}b2" down
cut_at=$SECONDS
wait_job 90
echo "elastic launchers ended ${codes[*]} within $((SECONDS - cut_at)) s of the cut"
done_lines=$(cat "$logs/elastic.h0" "$logs/elastic.h1" | grep -c '\] done id')
once=$(cat "$logs/elastic.h0" "$logs/elastic.h1" | grep -c ': exactly once per epoch: 0 of')
hashes=$(cat "$logs/elastic.h0" "$logs/elastic.h1" | grep '\] done id' | grep -o 'hash [0-9a-f]*' | sort -u | wc -l)
if [ "${codes[0]}" -eq 0 ] && [ "${codes[1]}" -eq 0 ] && [ "${codes[2]}" -ne 124 ] &&
   [ "$done_lines" -eq 4 ] && [ "$once" -eq 4 ] && [ "$hashes" -eq 1 ] &&
   grep -q "without \[4,5\]" "$logs/elastic.h0"; then
  echo "PASS elastic linkcut: $(grep -m1 'without \[4,5\]' "$logs/elastic.h0"); 4 ranks done with one hash, every sample once; h2's launcher exited ${codes[2]}"
else
  echo "FAIL elastic linkcut: launchers ${codes[*]}, $done_lines done, $once exactly once, $hashes hash(es)"
  cat "$logs"/elastic.h* | grep -v " W " | tail -60 | sed 's/^/    /'
  failures=$((failures + 1))
fi

# A node's launcher leaves and joins: h2's launcher is SIGKILLed (its ranks die with it,
# unrecorded), the others re-form after --join-timeout-ms; a new launcher on h2 records the lost
# processes' ends, so its ranks start as restarts and join at a step boundary.
link_up 2
start_job rejoin --elastic "$build/examples/elastic_train" --steps 3000 --count-samples \
  --join-timeout-ms 2000
sleep 4
kill -9 "${job_pids[2]}"
wait "${job_pids[2]}" 2>/dev/null
sleep 4
ip netns exec "${hosts[2]}" "$c10drun" --nnodes 3 --node-rank 2 --nproc-per-node 2 --elastic \
  --master-addr "$subnet.1" --master-port "$((port - 1))" "$build/examples/elastic_train" \
  --steps 3000 --count-samples --join-timeout-ms 2000 >"$logs/rejoin.h2b" 2>&1 &
job_pids[2]=$!
wait_job 90
all=$(cat "$logs/rejoin.h0" "$logs/rejoin.h1" "$logs/rejoin.h2b")
if [ "${codes[*]}" = "0 0 0" ] && [ "$(grep -c '\] done id' <<<"$all")" -eq 6 ] &&
   [ "$(grep -c ': exactly once per epoch: 0 of' <<<"$all")" -eq 6 ] &&
   [ "$(grep '\] done id' <<<"$all" | grep -o 'hash [0-9a-f]*' | sort -u | wc -l)" -eq 1 ] &&
   [ "$(grep -c '(restarted) joined' "$logs/rejoin.h2b")" -eq 2 ]; then
  echo "PASS node leave and join: $(grep -m1 'without \[4,5\]' "$logs/rejoin.h0"); $(grep -m1 '(restarted) joined' "$logs/rejoin.h2b"); 6 ranks done with one hash, every sample once"
else
  echo "FAIL node leave and join: launchers ${codes[*]}"
  cat "$logs"/rejoin.h* | grep -v " W " | tail -60 | sed 's/^/    /'
  failures=$((failures + 1))
fi

if [ $failures -eq 0 ]; then
  echo "ALL PASS"
  exit 0
fi
echo "$failures check(s) failed"
exit 1
