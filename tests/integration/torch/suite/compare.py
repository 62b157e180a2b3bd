"""Compares runs of PyTorch's distributed suite (run_distributed_suite.py's JSON files) and
writes the table docs/torch.md keeps.

    compare.py gloo.json c10d.json c10d-as-gloo.json [--markdown table.md]

Exits 1 when a test that passes on torch's gloo neither passes on c10d nor on c10d standing in
for gloo, unless KNOWN_GAPS below names it with the reason: every other test gloo passes must
pass on ours.
"""

import argparse
import collections
import json
import sys

# Failures of one of our columns explained (the test passes in the other).
EXPLAINED = {
    "test_ddp_logging_data_cpu":
        "asserts that DDP logs the backend name 'gloo'; ours says 'c10d' (passes in the c10d "
        "column)",
}

# Tests gloo passes and ours cannot, with why. Keep this short and true.
KNOWN_GAPS = {
    "test_sparse_all_reduce_sum":
        "sparse tensors: c10d's collectives take dense tensors (it fails with a clear error)",
}


def load(path):
    with open(path) as f:
        return json.load(f)


def short(reason):
    line = reason.strip().splitlines()[-1] if reason.strip() else ""
    return line[:110]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("gloo")
    parser.add_argument("c10d")
    parser.add_argument("as_gloo")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    runs = [load(args.gloo), load(args.c10d), load(args.as_gloo)]
    gloo, ours, as_gloo = (run["tests"] for run in runs)
    names = sorted(set(gloo) | set(ours) | set(as_gloo))

    lines = []
    counts = [collections.Counter(t[n]["outcome"] for n in t) for t in (gloo, ours, as_gloo)]
    lines.append(f"PyTorch {runs[0]['torch']} `distributed_test`, world size {runs[0]['world_size']}"
                 f", {len(names)} tests of `_DistTestBase`.\n")
    lines.append("| | torch's gloo | c10d | c10d standing in for gloo |")
    lines.append("|---|---|---|---|")
    for outcome in ("pass", "fail", "skip"):
        lines.append(f"| {outcome} | " + " | ".join(str(c.get(outcome, 0)) for c in counts) + " |")
    lines.append("")
    failures = []
    lines.append("Tests torch's gloo passes that do not pass in the c10d column: the suite reserves "
                 "them for backends it names; the last column runs them on c10d all the same.\n")
    lines.append("| test | c10d | why not in c10d | c10d standing in for gloo |")
    lines.append("|---|---|---|---|")
    for name in names:
        g, o, a = (t.get(name, {"outcome": "-", "reason": ""}) for t in (gloo, ours, as_gloo))
        if g["outcome"] != "pass" or o["outcome"] == "pass":
            continue
        verdict = a["outcome"]
        if a["outcome"] != "pass":
            if name in KNOWN_GAPS:
                verdict += ": " + KNOWN_GAPS[name]
            else:
                failures.append(name)
                verdict += ": REGRESSION: " + short(a["reason"])
        lines.append(f"| {name} | {o['outcome']} | {short(o['reason']).replace('|', '/')} | "
                     f"{verdict.replace('|', '/')} |")
    lines.append("")
    lines.append("Failures in our columns (a test gloo passes, failing in one of ours while "
                 "passing in the other, counts as passed above):\n")
    lines.append("| test | column | failure |")
    lines.append("|---|---|---|")
    for name in names:
        for label, tests in (("c10d", ours), ("c10d as gloo", as_gloo)):
            entry = tests.get(name)
            if entry and entry["outcome"] == "fail":
                why = KNOWN_GAPS.get(name) or EXPLAINED.get(name) or short(entry["reason"])
                lines.append(f"| {name} | {label} | {why.replace('|', '/')} |")
    lines.append("")
    lines.append("Tests that run in no column here, by the suite's reason (gloo's run):\n")
    lines.append("| reason | tests |")
    lines.append("|---|---|")
    everywhere = collections.Counter(
        short(gloo[n]["reason"]) for n in names
        if all(t.get(n, {}).get("outcome") == "skip" for t in (gloo, ours, as_gloo)))
    for reason, count in everywhere.most_common():
        lines.append(f"| {reason.replace('|', '/')} | {count} |")
    table = "\n".join(lines) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    for i, label in enumerate(("gloo", "c10d", "c10d as gloo")):
        print(f"{label}: {dict(counts[i])}")
    for name in names:
        if ours.get(name, {}).get("outcome") == "fail":
            print(f"c10d fails {name}: {short(ours[name]['reason'])}")
        if as_gloo.get(name, {}).get("outcome") == "fail" and name not in KNOWN_GAPS:
            print(f"c10d as gloo fails {name}: {short(as_gloo[name]['reason'])}")
    for name in failures:
        print(f"REGRESSION: {name} passes on gloo but on neither c10d run")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
