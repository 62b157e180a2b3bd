#!/usr/bin/env python3
"""Non-blocking point-to-point: rank 0 sends a tensor to rank 1 with isend, rank 1 receives it
with irecv, and both wait for their request.

The second program of PyTorch's "Writing Distributed Applications" tutorial, on c10d: it imports
c10d as dist where the tutorial imports torch.distributed, and is otherwise the same program but
for starting its ranks with c10d.multiprocessing.spawn, which picks a free MASTER_PORT and stops
the other rank when one fails.

    python3 p2p_nonblocking.py [--numpy]  # spawns the 2 ranks itself
    c10drun --nproc-per-node 2 python3 p2p_nonblocking.py [--numpy]

--numpy runs it on NumPy arrays instead of torch tensors. Exits 1 when a rank got wrong data.
"""
import os
import sys

import c10d as dist

if "--numpy" in sys.argv:
    import numpy as xp
else:
    import torch as xp


def run(rank, size):
    """Non-blocking point-to-point communication; returns whether this rank's data is right."""
    tensor = xp.zeros(1)
    req = None
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        req = dist.isend(tensor=tensor, dst=1)
        print('Rank 0 started sending')
    elif rank == 1:
        # Receive tensor from process 0
        req = dist.irecv(tensor=tensor, src=0)
        print('Rank 1 started receiving')
    if req is not None:
        req.wait()
    print('Rank ', rank, ' has data ', tensor[0])
    return rank > 1 or tensor[0] == 1


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
