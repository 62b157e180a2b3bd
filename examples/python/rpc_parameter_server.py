#!/usr/bin/env python3
"""A parameter server trained with distributed autograd, as PyTorch's "Implementing a Parameter
Server Using Distributed RPC Framework" tutorial, on c10d: rank 0 ("ps") holds the model; every
other rank is a trainer that runs the model's forward on the server by RPC inside a distributed
autograd context, computes the loss locally, runs dist_autograd.backward (the gradients flow back
to the server's parameters) and steps a DistributedOptimizer over the server's parameters. A
synthetic two-class problem and a linear classifier stand in for MNIST and its network.

    c10drun --nproc-per-node 3 python3 rpc_parameter_server.py

Prints each trainer's loss per epoch; exits 1 unless every trainer's loss fell.
"""
import os
import sys
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F

from c10d import dist_autograd, rpc
from c10d.optim import DistributedOptimizer

EPOCHS = 4
BATCHES = 8
BATCH = 32

_model = None
_model_lock = threading.Lock()


# ---- on the parameter server ----

def _server_model():
    global _model
    with _model_lock:
        if _model is None:
            torch.manual_seed(0)
            # One layer: trainers step it while others' backward passes run, and a layer that
            # saved its weight for a later layer's gradient would find it changed in place.
            _model = nn.Linear(8, 2)
        return _model


def forward(x):
    """The model's forward, run on the server for a trainer."""
    return _server_model()(x)


def parameter(index):
    """Through rpc.remote: a reference to one of the server's parameters, for the optimizer."""
    return list(_server_model().parameters())[index]


def parameter_count():
    return len(list(_server_model().parameters()))


# ---- on a trainer ----

def batches(rank):
    generator = torch.Generator().manual_seed(rank)
    direction = torch.linspace(-1, 1, 8)
    for _ in range(BATCHES):
        x = torch.randn(BATCH, 8, generator=generator)
        y = (x @ direction > 0).long()
        yield x, y


def train(rank):
    count = rpc.rpc_sync("ps", parameter_count)
    params = [rpc.remote("ps", parameter, (i,)) for i in range(count)]
    optimizer = DistributedOptimizer(torch.optim.SGD, params, lr=0.05)
    losses = []
    for epoch in range(EPOCHS):
        total = 0.0
        for x, y in batches(rank):
            with dist_autograd.context() as context_id:
                out = rpc.rpc_sync("ps", forward, (x,))
                loss = F.cross_entropy(out, y)
                dist_autograd.backward(context_id, [loss])
                optimizer.step(context_id)
            total += loss.item()
        losses.append(total / BATCHES)
        print(f"trainer {rank} epoch {epoch} loss {losses[-1]:.4f}", flush=True)
    return losses


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if world_size < 2:
        print("rpc_parameter_server: needs a server and at least one trainer (2+ ranks)")
        return 1
    rpc.init_rpc("ps" if rank == 0 else f"trainer{rank}", rank=rank, world_size=world_size)
    ok = True
    if rank != 0:
        losses = train(rank)
        ok = losses[-1] < losses[0]
        if not ok:
            print(f"trainer {rank}: the loss did not fall: {losses}", flush=True)
    rpc.shutdown()  # graceful: the server waits for every trainer
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
