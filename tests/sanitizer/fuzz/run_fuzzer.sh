#!/usr/bin/env bash
# Runs a libFuzzer harness built by `cmake --build` (tests/sanitizer/CMakeLists.txt, fuzz_build: clang,
# ASan and UBSan, core and RPC only, in FUZZ_BUILD_DIR); ctest runs each one.
#
#   run_fuzzer.sh run FUZZ_BUILD_DIR NAME SECONDS
#       runs NAME for SECONDS from its corpus in tests/sanitizer/fuzz/corpus/ (NAME without _fuzzer) (read
#       only: new inputs go to a scratch folder), fails on any crash, leak, sanitizer report or
#       failed property, and checks that it executed a meaningful number of inputs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

case "${1:-}" in
  run)
    build_dir="$2"
    name="$3"
    seconds="$4"
    binary="$build_dir/tests/sanitizer/fuzz/$name"
    corpus="$here/corpus/${name%_fuzzer}"
    [ -x "$binary" ] ||
      { echo "run_fuzzer: $binary not built (cmake --build builds it, with the tests)" >&2; exit 1; }
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
    echo "usage: $0 run FUZZ_BUILD_DIR NAME SECONDS" >&2
    exit 2
    ;;
esac
