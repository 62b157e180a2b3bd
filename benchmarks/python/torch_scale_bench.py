#!/usr/bin/env python3
"""c10d-scale-bench's figures for torch.distributed's own Gloo (PyTorch 1.13), to put beside
ours: run under a launcher that sets the rendezvous variables, e.g.
`c10drun --nproc-per-node 64 python3 torch_scale_bench.py`.

Each rank initialises the default group (env://) and ends a first barrier (init); then makes the
same 3-D layout as c10d-scale-bench (tensor groups of 2, pipeline groups of 4, data groups of the
rest; PyTorch 1.13 has no split, so every rank calls new_group for every group, as its
documentation requires) and uses its own three with one 4-byte all_reduce each; then
--extra-groups more (halves by parity and by position, alternately). After each phase it notes
threads, descriptors and resident memory (/proc/self; the interpreter's own threads included).
Rank 0 prints each figure's minimum, median and maximum over the ranks.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

start = time.monotonic()
parser = argparse.ArgumentParser()
parser.add_argument("--extra-groups", type=int, default=0)
args = parser.parse_args()


def snapshot():
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024
    return len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd")), rss


def use_once(group):
    value = torch.ones(1)
    dist.all_reduce(value, group=group)
    assert value.item() == dist.get_world_size(group), value


dist.init_process_group("gloo")
dist.barrier()
init_seconds = time.monotonic() - start
init = snapshot()
rank, size = dist.get_rank(), dist.get_world_size()
assert size % 8 == 0, f"world size {size} is not a multiple of 8"


def make(colour_of):
    """Every rank creates every group of the colouring (new_group's rule); returns its own."""
    mine = None
    for colour in sorted({colour_of(r) for r in range(size)}):
        members = [r for r in range(size) if colour_of(r) == colour]
        group = dist.new_group(members)
        if rank in members:
            mine = group
    return mine


subgroups_start = time.monotonic()
own = [make(lambda r: r // 2), make(lambda r: r // 8 * 2 + r % 2), make(lambda r: r % 8)]
for group in own:
    use_once(group)
subgroup_seconds = time.monotonic() - subgroups_start
subgroups = snapshot()

extra_start = time.monotonic()
for i in range(args.extra_groups):
    group = make((lambda r: r % 2) if i % 2 == 0 else (lambda r: r * 2 // size))
    use_once(group)
extra_seconds = time.monotonic() - extra_start
extra = snapshot()

figures = [
    ("init to the first barrier's end", init_seconds, "s"),
    ("three subgroups made and used", subgroup_seconds, "s"),
    ("extra groups made and used", extra_seconds, "s"),
    ("threads after init", init[0], ""),
    ("threads after the subgroups", subgroups[0], ""),
    ("threads after the extra groups", extra[0], ""),
    ("descriptors after init", init[1], ""),
    ("descriptors after the subgroups", subgroups[1], ""),
    ("descriptors after the extra groups", extra[1], ""),
    ("resident MiB after init", init[2], "MiB"),
    ("resident MiB after the extra groups", extra[2], "MiB"),
]
mine = torch.tensor([float(value) for _, value, _ in figures], dtype=torch.float64)
gathered = [torch.zeros_like(mine) for _ in range(size)]
dist.all_gather(gathered, mine)
if rank == 0:
    print(f"torch {torch.__version__} ProcessGroupGloo: {size} ranks (one process each) on "
          f"{os.cpu_count()} cores; {args.extra_groups} extra groups")
    print(f"{'per rank':40} {'min':>12} {'median':>12} {'max':>12}")
    for index, (name, _, unit) in enumerate(figures):
        values = sorted(float(g[index]) for g in gathered)
        print(f"{name:40} {values[0]:12.4g} {values[len(values) // 2]:12.4g} "
              f"{values[-1]:12.4g} {unit}")
dist.barrier()
dist.destroy_process_group()
