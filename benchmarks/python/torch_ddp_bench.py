#!/usr/bin/env python3
"""torch's own DistributedDataParallel, and torch.distributed.all_reduce, on torch's gloo and on
c10d (c10d.torch), alternating in one job so both see the same machine state.

    torchrun --nproc_per_node 2 torch_ddp_bench.py --model resnet50 [--rounds 5] [--steps 5]
    torchrun --nproc_per_node 2 torch_ddp_bench.py --latency [--iters 2000]

(c10drun --nproc-per-node 2 python3 torch_ddp_bench.py ... works the same.)

--model: the gradient shapes of a real model (../shared/models/<model>.json, or --shapes FILE).
Each parameter's gradient becomes ready after a backward that sleeps 1 ns per gradient byte
(--ns-per-byte), as an accelerator's backward leaves the CPU to communication, as c10d-ddp-bench
does. "local" is that backward without DDP. "no comm" is DDP with a comm hook that returns the
bucket at once: DDP's own work (copying gradients into buckets and back, its autograd hooks),
which is the same whatever the backend. "exposed" is a backend's DDP step minus "no comm": the
communication the backward did not hide; "over local" is its step minus local. Rounds alternate
the configurations; rank 0 prints the median over steps of each round, then the median (min-max)
over rounds, as JSON lines and a table.

--latency: all_reduce of 4 B and 4 MiB float32 through each backend's group, p50 and p90 in µs,
alternating blocks of iterations.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d.torch


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, parameter, seconds):
        ctx.seconds = seconds
        return parameter.view_as(parameter)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


class ShapesModel(nn.Module):
    def __init__(self, shapes, ns_per_byte):
        super().__init__()
        self.params = nn.ParameterList([nn.Parameter(torch.zeros(s)) for s in shapes])
        self.seconds = [p.numel() * 4 * ns_per_byte * 1e-9 for p in self.params]

    def forward(self):
        return sum(SlowBackward.apply(p, s).sum() for p, s in zip(self.params, self.seconds))


def load_shapes(args):
    path = args.shapes or os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                       "models", f"{args.model}.json")
    with open(path) as f:
        return json.load(f)["shapes"]


def step_ms(module, steps):
    times = []
    for _ in range(steps + 1):  # the first step builds DDP's buckets: not timed
        start = time.perf_counter()
        module().backward()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[1:])


def slowest(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def summary(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def no_communication(state, bucket):
    """A comm hook that leaves the bucket as it is: DDP's own cost without any communication."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def ddp(args, groups):
    shapes = load_shapes(args)
    local_model = ShapesModel(shapes, args.ns_per_byte)
    models = {name: DDP(ShapesModel(shapes, args.ns_per_byte), process_group=group)
              for name, group in groups.items()}
    models["no comm"] = DDP(ShapesModel(shapes, args.ns_per_byte), process_group=groups["c10d"])
    models["no comm"].register_comm_hook(None, no_communication)
    results = {"local": [], **{name: [] for name in models}}
    for _ in range(args.rounds):
        results["local"].append(slowest(step_ms(local_model, args.steps)))
        for name, model in models.items():
            results[name].append(slowest(step_ms(model, args.steps)))
    if dist.get_rank() == 0:
        megabytes = sum(torch.Size(s).numel() for s in shapes) * 4 / 1e6
        print(json.dumps({"model": args.model, "ranks": dist.get_world_size(), **results}))
        print("| model, ranks | local (ms) | no comm (ms) | " +
              " | ".join(f"{n} step (ms) | {n} exposed (ms) | {n} over local (ms)"
                         for n in groups) + " |")
        local = statistics.median(results["local"])
        # Per round: each backend's step against that round's no-comm step.
        cells = [f"{args.model} ({megabytes:.0f} MB), {dist.get_world_size()}", f"{local:.2f}",
                 summary(results["no comm"])]
        for name in groups:
            cells += [summary(results[name]),
                      summary([v - n for v, n in zip(results[name], results["no comm"])]),
                      summary([v - local for v in results[name]])]
        print("| " + " | ".join(cells) + " |")


def latency(args, groups):
    sizes = {"4 B": 1, "4 MiB": 1 << 20}
    samples = {(n, s): [] for n in groups for s in sizes}
    for _ in range(args.rounds):
        for size_name, numel in sizes.items():
            tensor = torch.ones(numel)
            iters = args.iters if numel == 1 else max(20, args.iters // 100)
            for name, group in groups.items():
                for _ in range(10):
                    dist.all_reduce(tensor, group=group)
                for _ in range(iters):
                    start = time.perf_counter()
                    dist.all_reduce(tensor, group=group)
                    samples[(name, size_name)].append((time.perf_counter() - start) * 1e6)
    if dist.get_rank() == 0:
        print("| backend | size | p50 (µs) | p90 (µs) |")
        print("|---|---|---|---|")
        for (name, size_name), values in samples.items():
            values.sort()
            print(f"| {name} | {size_name} | {values[len(values) // 2]:.1f} | "
                  f"{values[int(len(values) * 0.9)]:.1f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--shapes")
    parser.add_argument("--ns-per-byte", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    groups = {"gloo": dist.new_group(backend="gloo"),
              "c10d": dist.new_group(backend=c10d.torch.BACKEND)}
    (latency if args.latency else ddp)(args, groups)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
