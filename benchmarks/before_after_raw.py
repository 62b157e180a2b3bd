#!/usr/bin/env python3
"""Two builds of c10d against raw MPI, from alternating c10d-comm-bench --json runs: per op and
size, the median p50 (min-max over the runs) of each, after/raw, and the MPI backend's p50.

Usage:
  before_after_raw.py BEFORE_GLOB AFTER_GLOB MPI_GLOB [SIZES]
      MPI_GLOB: runs with C10D_BACKEND=mpi and --raw (their "raw" rows are raw MPI, their
      "c10d" rows the MPI backend). SIZES: comma-separated bytes to show (default: all).
"""
import collections
import glob
import json
import statistics
import sys


def p50s(pattern, path):
    runs = collections.defaultdict(list)
    for name in sorted(glob.glob(pattern)):
        for row in json.load(open(name)):
            if row["path"] == path:
                runs[(row["op"], row["bytes"])].append(row["p50_us"])
    return runs


def cell(values):
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    before, after = p50s(argv[1], "c10d"), p50s(argv[2], "c10d")
    backend, raw = p50s(argv[3], "c10d"), p50s(argv[3], "raw")
    sizes = {int(s) for s in argv[4].split(",")} if len(argv) > 4 else None
    print("| op | bytes | before p50 (µs) | after p50 (µs) | raw MPI p50 (µs) | after / raw "
          "| MPI backend p50 (µs) |")
    print("|---|---|---|---|---|---|---|")
    for op, size in sorted(after):
        if sizes and size not in sizes:
            continue
        ours, theirs = after[(op, size)], raw.get((op, size), [])
        ratio = f"{statistics.median(ours) / statistics.median(theirs):.2f}" if theirs else "-"
        print(f"| {op} | {size} | {cell(before.get((op, size), []))} | {cell(ours)} | "
              f"{cell(theirs)} | {ratio} | {cell(backend.get((op, size), []))} |")


if __name__ == "__main__":
    main(sys.argv)
