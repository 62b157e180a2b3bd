"""c10d.parallel at 2 ranks: the Reducer on numpy arrays with exactly known averages, and
DistributedDataParallel on a torch model against averages computed here from every rank's local
gradients of a plain copy of the model."""

import numpy as np
import pytest

import world

PARAMS, COUNT = 3, 5


def local_grad(rank, p, times=1):
    """What one backward on rank produces for parameter p (times backwards accumulated)."""
    return np.float32(times) * ((rank + 1) * (p + 1) + np.arange(COUNT, dtype=np.float32))


def average(size, p, times=1):
    return np.mean([local_grad(r, p, times) for r in range(size)], axis=0)


def run_reducer(rank, size):
    import c10d
    from c10d.parallel import Reducer

    values = [np.full(COUNT, rank * 100 + p, np.float32) for p in range(PARAMS)]
    grads = [np.zeros(COUNT, np.float32) for _ in range(PARAMS)]
    names = [f"layer{p}.weight" for p in range(PARAMS)]
    # small buckets: several of them
    reducer = Reducer(values, grads, first_bucket_bytes=COUNT * 4, bucket_cap_bytes=2 * COUNT * 4,
                      names=names)
    reducer.sync_parameters()
    for p in range(PARAMS):
        np.testing.assert_array_equal(values[p], np.full(COUNT, p))  # rank 0's

    def backward(accumulate=False):
        for p in reversed(range(PARAMS)):  # the last layers' gradients come first
            grads[p][:] = (grads[p] if accumulate else 0) + local_grad(rank, p)
            reducer.mark_grad_ready(p)

    for _ in range(2):
        backward()
        assert reducer.finalize_backward()
        for p in range(PARAMS):
            np.testing.assert_array_equal(grads[p], average(size, p))

    # no_sync: local accumulation, then one backward reduces the sums
    with reducer.no_sync():
        backward()
        assert not reducer.finalize_backward()
        for p in range(PARAMS):
            np.testing.assert_array_equal(grads[p], local_grad(rank, p))
    backward(accumulate=True)
    assert reducer.finalize_backward()
    for p in range(PARAMS):
        np.testing.assert_array_equal(grads[p], average(size, p, times=2))

    # a gradient nobody marked: every rank's error names it
    reducer.mark_grad_ready(0)
    reducer.mark_grad_ready(1)
    with pytest.raises(c10d.InvalidArgument, match="layer2.weight"):
        reducer.finalize_backward()
    with pytest.raises(c10d.InvalidArgument):
        reducer.mark_grad_ready(PARAMS)

    # the reducer's own gradient memory, as numpy views (fetched again after each backward)
    views = Reducer([v.reshape(1, COUNT) for v in values], gradient_as_bucket_view=True,
                    first_bucket_bytes=COUNT * 4, bucket_cap_bytes=2 * COUNT * 4)
    for _ in range(2):
        for p in reversed(range(PARAMS)):
            view = views.gradient(p)
            assert isinstance(view, np.ndarray) and view.shape == (1, COUNT)
            view[0] = local_grad(rank, p)
            views.mark_grad_ready(p)
        assert views.finalize_backward()
        for p in range(PARAMS):
            np.testing.assert_array_equal(views.gradient(p)[0], average(size, p))
    kept = views.gradient(0)
    del views  # the view keeps the reducer's memory
    np.testing.assert_array_equal(kept[0], average(size, 0))

    # reduced in float16: these values are exact there
    half = Reducer(values, grads, hook="fp16")
    for p in range(PARAMS):
        grads[p][:] = local_grad(rank, p)
        half.mark_grad_ready(p)
    half.finalize_backward()
    for p in range(PARAMS):
        np.testing.assert_array_equal(grads[p], average(size, p))


def test_reducer_numpy():
    world.run(run_reducer, 2)


def _model():
    import torch
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def _batch(rank, step):
    import torch
    generator = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(6, 4, generator=generator), torch.randn(6, 3, generator=generator)


def _loss(model, rank, step):
    import torch
    x, y = _batch(rank, step)
    return torch.nn.functional.mse_loss(model(x), y)


def _gathered(tensor, size):
    import torch

    import c10d
    parts = [torch.empty_like(tensor) for _ in range(size)]
    c10d.all_gather(parts, tensor.detach().contiguous())
    return parts


def _mean_over_ranks(tensor, size):
    return sum(_gathered(tensor, size)) / size


def _assert_same_on_every_rank(parameters, size):
    import torch
    for p in parameters:
        parts = _gathered(p, size)
        assert all(torch.equal(parts[0], other) for other in parts[1:])


def run_ddp(rank, size):
    import copy

    import torch

    from c10d.parallel import DistributedDataParallel

    for views in (False, True):
        torch.manual_seed(rank)  # different initial parameters on each rank
        model = _model()
        before = [p.detach().clone() for p in model.parameters()]
        ddp = DistributedDataParallel(model, gradient_as_bucket_view=views)
        # rank 0's parameters everywhere
        _assert_same_on_every_rank(ddp.parameters(), size)
        changed = any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
        assert changed == (rank != 0)
        plain = copy.deepcopy(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        plain_optimizer = torch.optim.SGD(plain.parameters(), lr=0.1)
        for step in range(3):
            # every rank's local gradients of the plain copy, averaged here
            plain_optimizer.zero_grad()
            _loss(plain, rank, step).backward()
            want = [_mean_over_ranks(p.grad, size) for p in plain.parameters()]

            optimizer.zero_grad(set_to_none=step == 1)  # a None .grad is handled too
            _loss(ddp, rank, step).backward()
            for p, expected in zip(ddp.parameters(), want):
                torch.testing.assert_close(p.grad, expected, rtol=1e-6, atol=1e-7)

            for p, expected in zip(plain.parameters(), want):
                p.grad.copy_(expected)
            optimizer.step()
            plain_optimizer.step()
            _assert_same_on_every_rank(ddp.parameters(), size)
            for p, q in zip(ddp.module.parameters(), plain.parameters()):
                torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_ddp_torch():
    world.run(run_ddp, 2)


def run_ddp_no_sync(rank, size):
    import copy

    import torch

    import c10d
    from c10d.parallel import DistributedDataParallel

    torch.manual_seed(rank)
    ddp = DistributedDataParallel(_model())
    plain = copy.deepcopy(ddp.module)
    plain.zero_grad()
    with ddp.no_sync():
        for step in range(2):
            _loss(ddp, rank, step).backward()
            _loss(plain, rank, step).backward()
            # local sums, not averaged
            for p, q in zip(ddp.parameters(), plain.parameters()):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-7)
    _loss(ddp, rank, 2).backward()
    _loss(plain, rank, 2).backward()
    for p, q in zip(ddp.parameters(), plain.parameters()):
        torch.testing.assert_close(p.grad, _mean_over_ranks(q.grad, size), rtol=1e-6, atol=1e-7)

    # a parameter the loss does not use: backward raises the reducer's error naming it
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(4, 3)
            self.unused = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.used(x)

    strict = DistributedDataParallel(TwoHeads())
    with pytest.raises(c10d.InvalidArgument, match="unused.weight"):
        _loss(strict, rank, 0).backward()
    tolerant = DistributedDataParallel(TwoHeads(), find_unused_parameters=True)
    _loss(tolerant, rank, 0).backward()
    assert tolerant.module.unused.weight.grad.abs().sum() == 0


def test_ddp_torch_no_sync():
    world.run(run_ddp_no_sync, 2)
