#!/usr/bin/env python3
"""Two builds or settings side by side, from alternating c10d-comm-bench --json runs.

Usage:
  ab_compare.py 'A_GLOB' 'B_GLOB' SIZES
      A_GLOB, B_GLOB: the runs of each side (e.g. 'docs/bench/shm_on_2ranks_run*.json').
      SIZES: comma-separated byte sizes to show.
One Markdown row per op and size of the c10d rows: the median over the runs of each side's p50
(with the runs' range) and of its busbw, and whether A's median p50 is over 5% above B's.
"""
import glob
import json
import statistics
import sys


def load(pattern):
    by = {}
    paths = sorted(glob.glob(pattern))
    if not paths:
        sys.exit(f"ab_compare.py: no file matches {pattern}")
    for path in paths:
        for row in json.load(open(path)):
            if row["path"] == "c10d":
                by.setdefault((row["op"], row["bytes"]), []).append(row)
    return by


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    sizes = [int(s) for s in sys.argv[3].split(",")]
    print("| op | size (B) | p50 A (µs), runs' range | p50 B (µs), runs' range "
          "| busbw A (GB/s) | busbw B (GB/s) | A slower |")
    print("|---|---|---|---|---|---|---|")
    for op in dict.fromkeys(op for op, _ in a):
        for size in sizes:
            if (op, size) not in a or (op, size) not in b:
                continue
            pa = [r["p50_us"] for r in a[(op, size)]]
            pb = [r["p50_us"] for r in b[(op, size)]]
            busa = statistics.median(r["busbw"] for r in a[(op, size)])
            busb = statistics.median(r["busbw"] for r in b[(op, size)])
            slower = "yes" if statistics.median(pa) > 1.05 * statistics.median(pb) else ""
            print(f"| {op} | {size} | {statistics.median(pa):.2f} ({min(pa):.2f}–{max(pa):.2f}) "
                  f"| {statistics.median(pb):.2f} ({min(pb):.2f}–{max(pb):.2f}) "
                  f"| {busa:.2f} | {busb:.2f} | {slower} |")


if __name__ == "__main__":
    main()
