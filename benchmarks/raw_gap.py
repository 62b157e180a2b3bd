#!/usr/bin/env python3
"""How far c10d-comm-bench's c10d rows are from its raw rows, per op.

Usage:
  raw_gap.py RANKS=RESULTS.json [...]
      One Markdown table: per op, the smallest size's times (c10d - raw) and the busbw
      ratio c10d/raw at 1, 2 and 4 MiB.
  raw_gap.py --repeats RANKS=RUN1.json,RUN2.json,... [...]
      Per op and size >= 1 MiB: the busbw ratio c10d/raw of each run and their median.
"""
import json
import statistics
import sys


def load(path):
    rows = json.load(open(path))
    return {(r["op"], r["bytes"], r["path"]): r for r in rows}, list(dict.fromkeys(r["op"] for r in rows))


def ratio(by, op, size):
    return by[(op, size, "c10d")]["busbw"] / by[(op, size, "raw")]["busbw"] * 100


def summary(args):
    print("| ranks | op | smallest size (B) | c10d time (µs) | raw time (µs) | c10d − raw (µs) "
          "| c10d p50 − raw p50 (µs) | busbw c10d/raw at 1 MiB | at 2 MiB | at 4 MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for arg in args:
        ranks, path = arg.split("=", 1)
        by, ops = load(path)
        for op in ops:
            sizes = sorted({b for (o, b, p) in by if o == op and p == "raw"})
            if not sizes:
                continue
            c, r = by[(op, sizes[0], "c10d")], by[(op, sizes[0], "raw")]
            big = []
            for target in (1 << 20, 2 << 20, 4 << 20):
                near = [b for b in sizes if target // 2 < b <= target]
                big.append(f"{ratio(by, op, near[-1]):.0f}%" if near else "–")
            print(f"| {ranks} | {op} | {sizes[0]} | {c['time_us']:.2f} | {r['time_us']:.2f} "
                  f"| {c['time_us'] - r['time_us']:.2f} | {c['p50_us'] - r['p50_us']:.2f} "
                  f"| {' | '.join(big)} |")


def repeats(args):
    print("| ranks | op | size (B) | busbw c10d/raw per run | median |")
    print("|---|---|---|---|---|")
    for arg in args:
        ranks, paths = arg.split("=", 1)
        runs = [load(p)[0] for p in paths.split(",")]
        keys = sorted({(o, b) for (o, b, p) in runs[0] if p == "raw" and b >= 1 << 20})
        for op, size in keys:
            values = [ratio(by, op, size) for by in runs]
            print(f"| {ranks} | {op} | {size} | {' / '.join(f'{v:.0f}%' for v in values)} "
                  f"| {statistics.median(values):.0f}% |")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    if sys.argv[1] == "--repeats":
        repeats(sys.argv[2:])
    else:
        summary(sys.argv[1:])
