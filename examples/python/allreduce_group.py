#!/usr/bin/env python3
"""Collective communication: all_reduce (SUM) of a tensor of ones within dist.new_group([0, 1]).

The collective program of PyTorch's "Writing Distributed Applications" tutorial, on c10d: it
imports c10d as dist where the tutorial imports torch.distributed, and is otherwise the same
program but for starting its ranks with c10d.multiprocessing.spawn, which picks a free
MASTER_PORT and stops the other rank when one fails.

    python3 allreduce_group.py [--numpy]  # spawns the 2 ranks itself
    c10drun --nproc-per-node 2 python3 allreduce_group.py [--numpy]

--numpy runs it on NumPy arrays instead of torch tensors. Exits 1 when a rank got a wrong sum.
With more than 2 ranks, the others are not in the group: their all_reduce does nothing.
"""
import os
import sys

import c10d as dist

if "--numpy" in sys.argv:
    import numpy as xp
else:
    import torch as xp


def run(rank, size):
    """Simple collective communication; returns whether this rank's data is right."""
    group = dist.new_group([0, 1])
    tensor = xp.ones(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    print('Rank ', rank, ' has data ', tensor[0])
    return tensor[0] == (2 if rank < 2 else 1)


def init_process(rank, size, fn, backend='gloo'):
    """Initialize the distributed environment, run fn, exit 1 when it found a wrong result."""
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ.setdefault('MASTER_PORT', '29500')
    dist.init_process_group(backend, rank=rank, world_size=size)
    ok = fn(rank, size)
    if not ok:
        print(f'Rank {rank}: wrong result', file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by c10drun or torchrun
        init_process(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), run)
    else:
        size = 2
        dist.multiprocessing.spawn(init_process, args=(size, run), nprocs=size)
