#!/usr/bin/env python3
"""Distributed synchronous SGD: every rank trains the same model on its partition of the data
and averages the gradients with all_reduce before each step, so the models stay the same.

The training program of PyTorch's "Writing Distributed Applications" tutorial, on c10d: it
imports c10d as dist where the tutorial imports torch.distributed. It trains a small network on
a synthetic regression problem instead of MNIST (nothing to download), and at the end checks that
every rank holds the same parameters by all_gather-ing a checksum of them.

    python3 sync_sgd.py [--numpy]  # spawns the 2 ranks itself (c10d.multiprocessing.spawn)
    c10drun --nproc-per-node 2 python3 sync_sgd.py [--numpy]

--numpy trains a linear model on NumPy arrays, with its gradient written out, instead of a torch
network. Exits 1 when the ranks' parameters differ or the loss did not go down.
"""
import os
import random
import sys
from math import ceil

import numpy as np

import c10d as dist

USE_NUMPY = "--numpy" in sys.argv
if not USE_NUMPY:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim

SAMPLES = 1024
FEATURES = 8
EPOCHS = 5


class Partition:
    """Dataset-like object, but only access a subset of it."""

    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        return self.data[self.index[index]]


class DataPartitioner:
    """Partitions a dataset into different chunks."""

    def __init__(self, data, sizes=(0.7, 0.2, 0.1), seed=1234):
        self.data = data
        self.partitions = []
        rng = random.Random()
        rng.seed(seed)
        indexes = list(range(len(data)))
        rng.shuffle(indexes)
        for frac in sizes:
            part_len = int(frac * len(data))
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


def synthetic_dataset():
    """(x, y) pairs with y = x . w + noise, the same on every rank (same seed)."""
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    w = rng.standard_normal(FEATURES).astype(np.float32)
    y = (x @ w + 0.1 * rng.standard_normal(SAMPLES)).astype(np.float32)
    return list(zip(x, y))


class Batches:
    """Batches of a partition, shuffled each epoch (what the tutorial's DataLoader does)."""

    def __init__(self, dataset, batch_size):
        self.dataset = dataset
        self.batch_size = batch_size
        self.rng = random.Random(dist.get_rank())

    def __len__(self):
        return ceil(len(self.dataset) / self.batch_size)

    def __iter__(self):
        order = list(range(len(self.dataset)))
        self.rng.shuffle(order)
        for start in range(0, len(order), self.batch_size):
            pairs = [self.dataset[i] for i in order[start:start + self.batch_size]]
            data, target = np.stack([p[0] for p in pairs]), np.array([p[1] for p in pairs])
            if USE_NUMPY:
                yield data, target
            else:
                yield torch.from_numpy(data), torch.from_numpy(target)


def partition_dataset():
    """Partitioning the synthetic dataset."""
    dataset = synthetic_dataset()
    size = dist.get_world_size()
    bsz = 128 // size
    partition_sizes = [1.0 / size for _ in range(size)]
    partition = DataPartitioner(dataset, partition_sizes)
    partition = partition.use(dist.get_rank())
    train_set = Batches(partition, bsz)
    return train_set, bsz


if not USE_NUMPY:
    class Net(nn.Module):
        """A small network: one hidden layer."""

        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(FEATURES, 16)
            self.fc2 = nn.Linear(16, 1)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x))).squeeze(1)

        def loss(self, data, target):
            return F.mse_loss(self(data), target)


class Parameter:
    """A NumPy parameter and its gradient, named as torch's are."""

    def __init__(self, data):
        self.data = data
        self.grad = np.zeros_like(data)


class SquaredError:
    """The mean squared error of a LinearModel on a batch, with its gradient written out."""

    def __init__(self, model, data, target):
        self.model = model
        self.data = data
        self.error = data @ model.weight.data + model.bias.data - target

    def item(self):
        return float(np.mean(self.error ** 2))

    def backward(self):
        n = len(self.error)
        self.model.weight.grad += 2 * self.data.T @ self.error / n
        self.model.bias.grad += 2 * self.error.sum(keepdims=True) / n


class LinearModel:
    """y = x . weight + bias, in NumPy."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.weight = Parameter((0.1 * rng.standard_normal(FEATURES)).astype(np.float32))
        self.bias = Parameter(np.zeros(1, np.float32))

    def parameters(self):
        return [self.weight, self.bias]

    def loss(self, data, target):
        return SquaredError(self, data, target)


class SGD:
    """Plain SGD over Parameters."""

    def __init__(self, params, lr):
        self.params = list(params)
        self.lr = lr

    def zero_grad(self):
        for p in self.params:
            p.grad[...] = 0

    def step(self):
        for p in self.params:
            p.data -= self.lr * p.grad


def average_gradients(model):
    """Gradient averaging."""
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
        param.grad /= size


def parameters_agree(model):
    """Whether every rank holds the same parameters: all_gather a checksum of them."""
    total = sum(float(p.data.sum()) for p in model.parameters())
    if USE_NUMPY:
        checksum, checksums = np.array([total]), [np.zeros(1) for _ in range(dist.get_world_size())]
    else:
        checksum = torch.tensor([total], dtype=torch.float64)
        checksums = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(checksums, checksum)
    values = [float(c[0]) for c in checksums]
    print('Rank ', dist.get_rank(), ' parameter checksums ', values)
    return max(values) - min(values) <= 1e-6 * max(1.0, abs(values[0]))


def run(rank, size):
    """Distributed synchronous SGD example; returns whether training went as it should."""
    if USE_NUMPY:
        model = LinearModel()
        optimizer = SGD(model.parameters(), lr=0.05)
    else:
        torch.manual_seed(1234)
        model = Net()
        optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    train_set, bsz = partition_dataset()
    num_batches = ceil(len(train_set.dataset) / float(bsz))
    epoch_losses = []
    for epoch in range(EPOCHS):
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            loss = model.loss(data, target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        print('Rank ', dist.get_rank(), ', epoch ', epoch, ': ', epoch_loss / num_batches)
        epoch_losses.append(epoch_loss / num_batches)
    return parameters_agree(model) and epoch_losses[-1] < epoch_losses[0]


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
