"""torch's DistributedDataParallel on c10d's backend against the same run on torch's gloo.

    ddp_equality.py [--steps 20] [--world-size 2]

Runs each configuration below for --steps steps on 2 ranks, once with backend "gloo" and once
with "c10d" (fresh processes each time, same seeds and data), and checks that every parameter
of every rank ends within 1e-6 relative of gloo's. Exits 1 naming the configuration and parameter
that differ, 0 when all agree; prints one line per configuration.

Configurations: plain; find_unused_parameters; no_sync (gradient accumulation); Join with uneven
inputs; static_graph; gradient_as_bucket_view; the fp16 compression hook; PowerSGD (rank 1,
from step 2). bf16's hook needs CUDA in torch 1.13 and is left out here.
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn

from ranks import run_ranks

CONFIGS = ["plain", "find_unused", "no_sync", "join_uneven", "static_graph", "bucket_view",
           "fp16_hook", "powersgd_hook"]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 8)
        self.unused_sometimes = nn.Linear(32, 8)

    def forward(self, x, use_branch=True):
        h = torch.relu(self.a(x))
        out = self.b(h)
        if use_branch:
            out = out + self.unused_sometimes(h)
        return out


def batches(rank, steps):
    generator = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(8, 16, generator=generator), torch.randn(8, 8, generator=generator))
            for _ in range(steps)]


def train(config, rank, steps):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = Net()
    kwargs = {}
    if config == "find_unused":
        kwargs["find_unused_parameters"] = True
    if config == "static_graph":
        kwargs["static_graph"] = True
    if config == "bucket_view":
        kwargs["gradient_as_bucket_view"] = True
        kwargs["bucket_cap_mb"] = 0.001  # several buckets
    ddp = DDP(model, **kwargs)
    if config == "fp16_hook":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    if config == "powersgd_hook":
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                       start_powerSGD_iter=2, random_seed=7)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = batches(rank, steps)
    if config == "join_uneven":
        data = data[: steps - 3 * rank]  # rank 1 runs out 3 steps early
    loss_fn = nn.MSELoss()

    def step(i, x, y):
        use_branch = config != "find_unused" or i % 3 != 0
        loss = loss_fn(ddp(x, use_branch) if config == "find_unused" else ddp(x), y)
        loss.backward()

    if config == "join_uneven":
        with Join([ddp]):
            for i, (x, y) in enumerate(data):
                optimizer.zero_grad()
                step(i, x, y)
                optimizer.step()
    elif config == "no_sync":
        for i in range(0, len(data) - 1, 2):
            optimizer.zero_grad()
            with ddp.no_sync():
                step(i, *data[i])
            step(i + 1, *data[i + 1])
            optimizer.step()
    else:
        for i, (x, y) in enumerate(data):
            optimizer.zero_grad()
            step(i, x, y)
            optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def worker(backend, out, steps):
    rank = int(os.environ["RANK"])
    if backend != "gloo":
        import c10d.torch  # noqa: F401
    dist.init_process_group(backend)
    results = {}
    for config in CONFIGS:
        print(f"{backend} rank {rank}: {config}", file=sys.stderr, flush=True)
        results[config] = train(config, rank, steps)
    dist.barrier()
    dist.destroy_process_group()
    torch.save(results, f"{out}.{rank}")


def run(backend, world_size, steps, directory):
    out = os.path.join(directory, backend)
    codes = run_ranks([__file__, "--worker", backend, "--out", out, "--steps", str(steps)],
                      world_size, timeout=240)
    if any(codes):
        sys.exit(f"{backend}: ranks exited with {codes}")
    return [torch.load(f"{out}.{rank}") for rank in range(world_size)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--worker")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.out, args.steps)
        return 0
    with tempfile.TemporaryDirectory() as directory:
        gloo = run("gloo", args.world_size, args.steps, directory)
        ours = run("c10d", args.world_size, args.steps, directory)
    failed = False
    for config in CONFIGS:
        worst = 0.0
        for rank in range(args.world_size):
            for index, (a, b) in enumerate(zip(gloo[rank][config], ours[rank][config])):
                rel = ((a - b).abs().max() / a.abs().max().clamp(min=1e-30)).item()
                worst = max(worst, rel)
                if not rel <= 1e-6:
                    print(f"{config}: rank {rank} parameter {index} differs from gloo's by "
                          f"{rel:.3g} relative (max |gloo| {a.abs().max().item():.4g})")
                    failed = True
        if any(not torch.equal(p, q) for p, q in zip(gloo[0][config], gloo[1][config])):
            print(f"{config}: ranks disagree under gloo itself")
            failed = True
        torch.manual_seed(0)
        initial = list(Net().parameters())
        if all(torch.equal(p, q) for p, q in zip(initial, ours[0][config])):
            print(f"{config}: no parameter moved in {args.steps} steps: nothing was compared")
            failed = True
        print(f"{config}: {args.steps} steps, largest relative difference from gloo {worst:.3g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
