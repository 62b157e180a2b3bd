#!/usr/bin/env python3
"""Reads the flight recorder dumps of a job's ranks and says who is behind, and where.

Usage: flight_report.py DUMP_OR_DIR [...]
  Each argument is a dump (c10d_flight_<group>_rank<R>.json, see c10d/FlightRecorder.hpp) or a
  directory holding them. Per group, the report names:
  - ranks with no dump (lost before they could write one, or not asked);
  - ranks behind the furthest rank: their last collective and its state, against the
    collective the others are in;
  - collectives whose calls differ between ranks at the same sequence number;
  - point-to-point ops still open on each rank (who waits on whom);
  - the first failure each rank recorded.
Exit status: 0 when every group's ranks are level, 1 when some rank is behind, calls differ or
a point-to-point op is open, 2 on unusable input.
"""
import glob
import json
import os
import re
import sys


def load(paths):
    dumps = []
    for path in paths:
        files = sorted(glob.glob(os.path.join(path, "c10d_flight_*.json"))) if os.path.isdir(path) else [path]
        for name in files:
            try:
                with open(name) as f:
                    dump = json.load(f)
            except (OSError, ValueError) as e:
                sys.exit(f"flight_report: cannot read {name}: {e}")
            for key in ("group", "rank", "size", "entries"):
                if key not in dump:
                    sys.exit(f"flight_report: {name} has no '{key}': not a c10d flight recorder dump")
            dumps.append(dump)
    if not dumps:
        sys.exit("flight_report: no dumps found in " + " ".join(paths))
    return dumps


def call_text(entry):
    return re.sub(r" \(#\d+\)$", "", entry["call"])


def describe(entry):
    return f"#{entry['seq']} {call_text(entry)} ({entry['state']})"


def ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def report_group(group, dumps):
    size = max(d["size"] for d in dumps)
    by_rank = {d["rank"]: d for d in dumps}
    trouble = False
    print(f"group '{group}': {len(by_rank)} of {size} ranks dumped")
    missing = [r for r in range(size) if r not in by_rank]
    if missing:
        print(f"  no dump from {ranks_text(missing)}: lost before writing one, or never asked")
        trouble = True

    # Point-to-point ops are numbered per rank (a send here is a receive there): what is still
    # open tells who waits on whom.
    for rank in sorted(by_rank):
        for op in by_rank[rank].get("p2p", []):
            if op["state"] in ("queued", "started"):
                peer = f"rank {op['peer']}" if op["peer"] >= 0 else "any rank"
                way = "to" if op["op"] == "send" else "from"
                print(f"  rank {rank} waits in point-to-point #{op['n']}: {op['op']} "
                      f"{op['dtype']}[{op['numel']}] {way} {peer} tag {op['tag']}")
                trouble = True

    last = {}
    for rank, dump in by_rank.items():
        entries = sorted(dump["entries"], key=lambda e: e["seq"])
        last[rank] = entries[-1] if entries else None
    furthest = max((e["seq"] for e in last.values() if e is not None), default=-1)
    leaders = [r for r, e in last.items() if e is not None and e["seq"] == furthest]
    if furthest < 0:
        print("  no collective recorded on any rank")
        return trouble
    lead = last[leaders[0]]
    print(f"  furthest: {ranks_text(leaders)} at {describe(lead)}")
    for rank in sorted(by_rank):
        entry = last[rank]
        if entry is None:
            print(f"  rank {rank} is behind: it recorded no collective; "
                  f"{ranks_text(leaders)} reached #{furthest} {call_text(lead)}")
            trouble = True
        elif entry["seq"] < furthest:
            print(f"  rank {rank} is behind: its last collective is {describe(entry)}; "
                  f"{ranks_text(leaders)} reached #{furthest} {call_text(lead)} ({lead['state']})")
            trouble = True
    unfinished = [r for r in leaders if last[r]["state"] in ("queued", "started")]
    if unfinished and len(leaders) < len(by_rank):
        print(f"  {ranks_text(unfinished)} wait in #{furthest} for the ranks behind")

    calls = {}
    for rank, dump in by_rank.items():
        for entry in dump["entries"]:
            calls.setdefault(entry["seq"], {}).setdefault(call_text(entry), []).append(rank)
    for seq in sorted(calls):
        if len(calls[seq]) > 1:
            parts = "; ".join(f"{ranks_text(r)}: {c}" for c, r in calls[seq].items())
            print(f"  collective #{seq} differs between ranks: {parts}")
            trouble = True

    for rank in sorted(by_rank):
        failed = [e for e in by_rank[rank]["entries"] if e["state"] == "failed"]
        if failed:
            first = min(failed, key=lambda e: e["seq"])
            print(f"  rank {rank} first failure: #{first['seq']} {call_text(first)}: {first['error']}")
    return trouble


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    dumps = load(argv[1:])
    groups = {}
    for dump in dumps:
        groups.setdefault(dump["group"], []).append(dump)
    trouble = False
    for group in sorted(groups):
        trouble |= report_group(group, groups[group])
    return 1 if trouble else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
