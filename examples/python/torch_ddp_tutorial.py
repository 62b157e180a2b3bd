#!/usr/bin/env python3
"""PyTorch's DDP tutorial ("Getting Started with Distributed Data Parallel": the basic use case and
checkpointing) on torch.distributed itself, with c10d underneath: the one change is the backend
string, "c10d" where the tutorial writes "gloo" (and `import c10d.torch`, which registers it).

    python3 torch_ddp_tutorial.py [--backend gloo]   # spawns 2 ranks with torch.multiprocessing
    torchrun --nproc_per_node 2 torch_ddp_tutorial.py

Exits 1 when the ranks' parameters differ after training or the checkpoint did not restore them.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d.torch  # noqa: F401  (registers the "c10d" backend)

BACKEND = "gloo" if "--backend" in sys.argv and sys.argv[-1] == "gloo" else "c10d"


def setup(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12355")
    dist.init_process_group(BACKEND, rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def same_on_every_rank(model):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    copies = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(copies, flat)
    return all(torch.equal(copies[0], c) for c in copies)


def demo_basic(rank, world_size):
    print(f"Running basic DDP example on rank {rank}.")
    setup(rank, world_size)
    model = ToyModel()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    for _ in range(5):
        optimizer.zero_grad()
        outputs = ddp_model(torch.randn(20, 10))
        loss_fn(outputs, torch.randn(20, 5)).backward()
        optimizer.step()
    ok = same_on_every_rank(model)
    cleanup()
    if not ok:
        sys.exit(f"rank {rank}: parameters differ between ranks after training")


def demo_checkpoint(rank, world_size, path):
    print(f"Running DDP checkpoint example on rank {rank}.")
    setup(rank, world_size)
    model = ToyModel()
    ddp_model = DDP(model)
    if rank == 0:
        # All processes start from the same parameters, so saving on one rank is enough.
        torch.save(ddp_model.state_dict(), path)
    dist.barrier()  # the others load only once rank 0 has saved
    ddp_model.load_state_dict(torch.load(path, map_location="cpu"))
    saved = torch.load(path, map_location="cpu")
    restored = all(torch.equal(saved[k], v) for k, v in ddp_model.state_dict().items())
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    loss_fn(ddp_model(torch.randn(20, 10)), torch.randn(20, 5)).backward()
    optimizer.step()
    dist.barrier()  # nobody removes the file while another rank reads it
    if rank == 0:
        os.remove(path)
    ok = restored and same_on_every_rank(model)
    cleanup()
    if not ok:
        sys.exit(f"rank {rank}: checkpoint not restored or ranks differ")


def run_demo(demo_fn, world_size, *args):
    mp.spawn(demo_fn, args=(world_size, *args), nprocs=world_size, join=True)


if __name__ == "__main__":
    if "RANK" in os.environ:  # torchrun, c10drun
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        demo_basic(rank, world_size)
        demo_checkpoint(rank, world_size, os.path.join(tempfile.gettempdir(),
                                                       f"ddp-tutorial-{os.environ['MASTER_PORT']}"))
    else:
        os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "12355")
        run_demo(demo_basic, 2)
        with tempfile.TemporaryDirectory() as scratch:
            run_demo(demo_checkpoint, 2, os.path.join(scratch, "model.checkpoint"))
    print("done")
