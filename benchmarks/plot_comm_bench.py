#!/usr/bin/python3
"""Plots c10d-comm-bench results: bus bandwidth and latency against message size.

Usage: plot_comm_bench.py OUTPUT_PREFIX LABEL=RESULTS.json [LABEL=RESULTS.json ...]
       plot_comm_bench.py --table LABEL=RESULTS.json [...]   (markdown tables on stdout)

Each RESULTS.json is what `c10d-comm-bench --op all --raw --json` printed (one JSON array).
Writes OUTPUT_PREFIX_busbw.png and OUTPUT_PREFIX_latency.png with one panel per op, a line per
(label, path), path being "c10d" (our ProcessGroup) or "raw" (Gloo called directly).
Needs Debian's python3-matplotlib (apt-get install python3-matplotlib).
"""
import json
import sys
from collections import defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_comm_bench.py needs matplotlib: apt-get install python3-matplotlib")


def load(specs):
    series = defaultdict(dict)  # op -> (label, path) -> [(bytes, busbw, time_us)]
    for spec in specs:
        label, _, path = spec.partition("=")
        with open(path) as f:
            rows = json.load(f)
        for row in rows:
            key = (label, row["path"])
            series[row["op"]].setdefault(key, []).append(
                (row["bytes"], row["busbw"], row["time_us"], row["p50_us"]))
    return series


def plot(series, metric, ylabel, output, logy):
    ops = sorted(series)
    columns = min(4, len(ops))
    rows = (len(ops) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    for index, op in enumerate(ops):
        ax = axes[index // columns][index % columns]
        for (label, path), points in sorted(series[op].items()):
            points.sort()
            xs = [p[0] for p in points]
            ys = [p[1] if metric == "busbw" else p[2] for p in points]
            style = "-" if path == "c10d" else "--"
            ax.plot(xs, ys, style, marker=".", label=f"{label} {path}")
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("bytes")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for index in range(len(ops), rows * columns):
        axes[index // columns][index % columns].axis("off")
    fig.tight_layout()
    fig.savefig(output, dpi=90)
    print(f"wrote {output}")


def table(series, sizes=(4, 1024, 32768, 262144, 1048576, 4194304)):
    for op in sorted(series):
        labels = sorted({label for label, _ in series[op]})
        for label in labels:
            ours = {p[0]: p for p in series[op].get((label, "c10d"), [])}
            raw = {p[0]: p for p in series[op].get((label, "raw"), [])}
            print(f"\n{op}, {label}:\n")
            print("| bytes | c10d time (us) | raw time (us) | c10d p50 (us) | raw p50 (us) "
                  "| c10d busbw (GB/s) | raw busbw (GB/s) |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            for size in sizes:
                if size not in ours:
                    continue
                r = raw.get(size)
                nan = float("nan")
                print(f"| {size} | {ours[size][2]:.1f} | {r[2] if r else nan:.1f} | "
                      f"{ours[size][3]:.1f} | {r[3] if r else nan:.1f} | "
                      f"{ours[size][1]:.3f} | {r[1] if r else nan:.3f} |")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--table":
        table(load(sys.argv[2:]))
        return
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    series = load(sys.argv[2:])
    plot(series, "busbw", "busbw (GB/s)", sys.argv[1] + "_busbw.png", False)
    plot(series, "time", "time per op (us)", sys.argv[1] + "_latency.png", True)


if __name__ == "__main__":
    main()
