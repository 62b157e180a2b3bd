#!/usr/bin/env python3
"""What a Python all_reduce costs over the same call from C++: run under a launcher with 2 ranks,
e.g. `c10drun --nproc-per-node 2 python3 allreduce_overhead.py`. Rank 0 prints one JSON line
with the median microseconds per blocking 4-byte all_reduce of each path (medians of --repeats
rounds of --iters calls), interleaving the paths round by round so that drift on a noisy machine
hits them alike. Compare with `c10d-comm-bench -b 4 -e 4` (C++), run the same way.

Paths: c10d.all_reduce on a NumPy array and on a torch tensor; the C API's c10d_allreduce called
straight through ctypes (the binding's floor); torch.distributed's all_reduce over its own Gloo
(PyTorch 1.13), when --torch is given.
"""
import argparse
import ctypes
import json
import os
import statistics
import time

import numpy as np

import c10d
from c10d import _capi

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=2000)
parser.add_argument("--repeats", type=int, default=7)
parser.add_argument("--torch", action="store_true", help="also time torch.distributed (gloo)")
args = parser.parse_args()

c10d.init_process_group("gloo")
rank = c10d.get_rank()
array = np.ones(1, dtype=np.float32)
paths = {"c10d.all_reduce(numpy)": lambda: c10d.all_reduce(array)}

try:
    import torch
    tensor = torch.ones(1)
    paths["c10d.all_reduce(torch)"] = lambda: c10d.all_reduce(tensor)
except ImportError:
    torch = None

group = c10d.distributed._world._handle
buffer = _capi.Buffer(array.ctypes.data, 1, 0, 0, 0, None)
allreduce = _capi.lib.c10d_allreduce
paths["ctypes c10d_allreduce"] = lambda: allreduce(group, ctypes.byref(buffer), None, None)

if args.torch and torch is not None:
    import torch.distributed as tdist
    store = tdist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1,
                           c10d.get_world_size(), rank == 0)
    tdist.init_process_group("gloo", store=store, rank=rank, world_size=c10d.get_world_size())
    torch_tensor = torch.ones(1)
    paths["torch.distributed.all_reduce(gloo)"] = lambda: tdist.all_reduce(torch_tensor)
    iters = {name: args.iters for name in paths}
    iters["torch.distributed.all_reduce(gloo)"] = max(1, args.iters // 20)  # ~100x slower
else:
    iters = {name: args.iters for name in paths}

rounds = {name: [] for name in paths}
for _ in range(args.repeats):
    for name, call in paths.items():
        for _ in range(100):  # warm up this path's caches before timing it
            call()
        c10d.barrier()
        start = time.perf_counter()
        for _ in range(iters[name]):
            call()
        rounds[name].append((time.perf_counter() - start) / iters[name] * 1e6)

if rank == 0:
    print(json.dumps({name: {"median_us": round(statistics.median(values), 2),
                             "min_us": round(min(values), 2), "max_us": round(max(values), 2)}
                      for name, values in rounds.items()}))
