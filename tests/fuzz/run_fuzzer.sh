#!/usr/bin/env bash
# Builds and runs the libFuzzer harnesses (ctest runs both steps; see tests/CMakeLists.txt).
#
#   run_fuzzer.sh build SOURCE_DIR FUZZ_BUILD_DIR
#       configures SOURCE_DIR with clang, ASan and UBSan into FUZZ_BUILD_DIR (core and RPC only,
#       no backends) and builds the harnesses.
#   run_fuzzer.sh run FUZZ_BUILD_DIR NAME SECONDS
#       runs NAME for SECONDS from its corpus in tests/fuzz/corpus/ (NAME without _fuzzer) (read only: new inputs go
#       to a scratch folder), fails on any crash, leak, sanitizer report or failed property, and
#       checks that it executed a meaningful number of inputs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

case "${1:-}" in
  build)
    source_dir="$2"
    build_dir="$3"
    command -v clang++ >/dev/null ||
      { echo "run_fuzzer: clang++ not found (tools/setup.sh installs clang)" >&2; exit 1; }
    flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
    cmake -S "$source_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DC10D_USE_GLOO=OFF -DC10D_USE_MPI=OFF -DC10D_USE_CUDA=OFF -DC10D_USE_NCCL=OFF \
      -DC10D_BUILD_TESTS=OFF -DC10D_BUILD_BENCHMARKS=OFF -DC10D_BUILD_EXAMPLES=OFF \
      -DC10D_BUILD_TOOLS=OFF -DC10D_BUILD_FUZZERS=ON >/dev/null
    cmake --build "$build_dir" --target store_server_fuzzer rpc_frame_fuzzer -j "$(nproc)"
    ;;
  run)
    build_dir="$2"
    name="$3"
    seconds="$4"
    binary="$build_dir/tests/fuzz/$name"
    corpus="$here/corpus/${name%_fuzzer}"
    [ -x "$binary" ] || { echo "run_fuzzer: $binary not built" >&2; exit 1; }
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    mkdir -p "$build_dir/artifacts" "$scratch/corpus"
    log="$scratch/log"
    status=0
    # Warnings for each dropped connection would only slow the server down.
    C10D_LOG_LEVEL=ERROR "$binary" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$name-" \
      "$scratch/corpus" "$corpus" >"$log" 2>&1 || status=$?
    tail -n 80 "$log"
    if [ "$status" -ne 0 ]; then
      echo "run_fuzzer: $name failed (exit $status); the input is in $build_dir/artifacts/" >&2
      exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    if [ -z "$runs" ] || [ "$runs" -lt 1000 ]; then
      echo "run_fuzzer: $name executed only '${runs:-0}' inputs in $seconds s" >&2
      exit 1
    fi
    echo "run_fuzzer: $name ran $runs inputs in $seconds s from $(ls "$corpus" | wc -l) seed(s); no failure"
    ;;
  *)
    echo "usage: $0 build SOURCE_DIR FUZZ_BUILD_DIR | run FUZZ_BUILD_DIR NAME SECONDS" >&2
    exit 2
    ;;
esac
