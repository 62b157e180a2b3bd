#!/usr/bin/env bash
# Collectives across hosts made of network namespaces (tests/integration/netns/hosts.sh): HOSTS namespaces
# (one rank each) reach a bridge in another namespace (the switch) through veth pairs, every link
# shaped to RATE each way with tc tbf (netem is not in every kernel). Runs c10d-comm-bench with
# --raw (ours and raw Gloo) and, when built (cmake --build BUILD --target torch-gloo-bench),
# PyTorch's C++ ProcessGroupGloo, one after the other, ROUNDS times alternating; prints each
# round's table of rank 0's p50 and, from it, the bus bandwidth (nccl-tests' factors) as a
# fraction of the link.
# One op per run (--op allreduce, allgather, reduce_scatter or broadcast).
#
# Usage: multi_host_bench.sh BUILD_DIR [HOSTS] [RATE] [ROUNDS] [-- comm-bench options]
#   e.g. multi_host_bench.sh build 4 1gbit 3 -- --op allreduce -b 4 -e 16M -n 20
#   RATE "none" leaves the links unshaped. Environment (C10D_*) passes through to the ranks;
#   MULTI_HOST_BENCH_OURS_ONLY=1 times ours alone, MULTI_HOST_BENCH_MPI=1 adds raw Open MPI (under
#   mpirun, TCP), MULTI_HOST_BENCH_RAW=1 shows the programs' output.
# Needs root and iproute2; the hosts share this machine's cores (say so beside any figure).
set -uo pipefail
build=$(cd "$1" && pwd)
hosts_wanted=${2:-4}
rate=${3:-1gbit}
rounds=${4:-1}
shift $(($# < 4 ? $# : 4))
[ "${1:-}" = "--" ] && shift
bench_args=("$@")
[ ${#bench_args[@]} -eq 0 ] && bench_args=(--op allreduce -b 4 -e 16M -n 20)

subnet=10.214.0
port=29617
source "$(dirname "$0")/../tests/integration/netns/hosts.sh"
trap netns_hosts_down EXIT
netns_hosts_up "b$$" "$subnet" "$hosts_wanted" "$rate" || exit 1
echo "# ${#hosts[@]} hosts at $subnet.1-${#hosts[@]}, links $rate each way, on $(nproc) cores"

# Runs PROGRAM ARGS with one rank per host; prints rank 0's output.
run_job() {
  local pids=() out
  out=$(mktemp)
  export TORCH_GLOO_BENCH_PORT=$((port + 1))
  for i in "${!hosts[@]}"; do
    if [ "$i" = 0 ]; then
      GLOO_SOCKET_IFNAME=eth0 ip netns exec "${hosts[$i]}" "$build/tools/c10drun" \
        --nnodes "${#hosts[@]}" --node-rank "$i" --nproc-per-node 1 --master-addr "$subnet.1" \
        --master-port "$port" "$@" >"$out" 2>&1 &
    else
      GLOO_SOCKET_IFNAME=eth0 ip netns exec "${hosts[$i]}" "$build/tools/c10drun" \
        --nnodes "${#hosts[@]}" --node-rank "$i" --nproc-per-node 1 --master-addr "$subnet.1" \
        --master-port "$port" "$@" >/dev/null 2>&1 &
    fi
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  port=$((port + 2))
  [ -n "${MULTI_HOST_BENCH_RAW:-}" ] && cat "$out" >&2
  grep -v "^\[c10d\|c10drun" "$out"
  rm -f "$out"
}

# Runs comm-bench over our MPI backend with --raw under mpirun, one rank per host; prints rank 0's
# output. mpirun runs in the first host, and starts its daemons in the others through an rsh
# agent that enters their namespaces, each under its own host name (Open MPI would otherwise take
# them for one host); its byte transfer layer is TCP on eth0.
run_mpi_job() {
  local dir list i vars=()
  dir=$(mktemp -d)
  {
    echo '#!/bin/bash'
    echo 'while [[ "$1" == -* ]]; do shift; done'
    echo 'case $1 in'
    for i in "${!hosts[@]}"; do echo "  $subnet.$((i + 1))) ns=${hosts[$i]} ;;"; done
    echo '  *) echo "no namespace host $1" >&2; exit 1 ;;'
    echo 'esac'
    echo 'shift'
    echo 'exec ip netns exec "$ns" unshare --uts /bin/sh -c "hostname $ns; $*"'
  } >"$dir/agent"
  chmod +x "$dir/agent"
  list=$subnet.1
  for ((i = 2; i <= ${#hosts[@]}; i++)); do list+=",$subnet.$i"; done
  for v in $(compgen -e | grep '^C10D_'); do vars+=(-x "$v"); done
  ip netns exec "${hosts[0]}" unshare --uts /bin/sh -c 'hostname "$0"; exec "$@"' \
    "${hosts[0]}" timeout 600 mpirun --allow-run-as-root --oversubscribe \
    --mca plm_rsh_agent "$dir/agent" --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 --host "$list" -np "${#hosts[@]}" -x C10D_BACKEND=mpi \
    "${vars[@]}" "$build/benchmarks/c10d-comm-bench" --raw --no-check "$@" >"$dir/out" 2>&1
  [ -n "${MULTI_HOST_BENCH_RAW:-}" ] && cat "$dir/out" >&2
  grep -v "^\[c10d" "$dir/out"
  rm -rf "$dir"
}

# The link in Gbit/s, for busbw as a fraction of it.
case $rate in
  *gbit) gbit=${rate%gbit} ;;
  *mbit) gbit=$(awk "BEGIN {print ${rate%mbit} / 1000}") ;;
  *) gbit=0 ;;
esac

# The op (for the bus bandwidth's factor): comm-bench's --op, allreduce by default.
op=allreduce
for ((i = 0; i + 1 < ${#bench_args[@]}; i++)); do
  [ "${bench_args[$i]}" = --op ] && op=${bench_args[$((i + 1))]}
done

# Rank 0's rows as "bytes p50 busbw path".
rows_of_comm_bench() { sed 's/^\[rank 0\] *//' | awk '$1 ~ /^[0-9]+$/ && NF >= 14 {print $1, $10, $8, $NF}'; }
rows_of_mpi() { rows_of_comm_bench | awk '$4 == "raw" {print $1, $2, $3, "mpi"}'; }
rows_of_torch() { sed 's/^\[rank 0\] *//' | awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $1, $2, $3, "torch"}'; }

for ((round = 1; round <= rounds; round++)); do
  rows=$(mktemp)
  raw=--raw
  [ -n "${MULTI_HOST_BENCH_OURS_ONLY:-}" ] && raw=
  run_job "$build/benchmarks/c10d-comm-bench" $raw --no-check "${bench_args[@]}" |
    rows_of_comm_bench >"$rows"
  if [ -x "$build/benchmarks/torch-gloo-bench" ] && [ -z "${MULTI_HOST_BENCH_OURS_ONLY:-}" ]; then
    run_job "$build/benchmarks/torch-gloo-bench" "${bench_args[@]}" | rows_of_torch >>"$rows"
  fi
  if [ -n "${MULTI_HOST_BENCH_MPI:-}" ]; then
    run_mpi_job "${bench_args[@]}" | rows_of_mpi >>"$rows"
  fi
  echo "## round $round (${bench_args[*]}): p50 us [busbw as a fraction of the link]"
  awk -v gbit="$gbit" -v ranks="${#hosts[@]}" -v op="$op" '
    { p50[$1, $4] = $2; bw[$1, $4] = $3; if (!($1 in seen)) { seen[$1] = 1; sizes[++n] = $1 } }
    END {
      printf "| bytes | c10d | raw Gloo | torch Gloo | raw Open MPI |\n|---|---|---|---|---|\n"
      for (i = 1; i <= n; i++) {
        b = sizes[i]; line = "| " b
        split("c10d raw torch mpi", paths, " ")
        for (j = 1; j <= 4; j++) {
          k = b SUBSEP paths[j]
          if (k in p50) {
            cell = p50[k]
            # nccl-tests bus bandwidth from the p50: what each link carries per second
            f = op == "allreduce" ? 2 * (ranks - 1) / ranks : op == "broadcast" ? 1 : (ranks - 1) / ranks
            if (gbit > 0) cell = sprintf("%s [%.2f]", cell, f * b * 8 / (p50[k] * 1000) / gbit)
          } else cell = "-"
          line = line " | " cell
        }
        print line " |"
      }
    }' "$rows"
  rm -f "$rows"
done
