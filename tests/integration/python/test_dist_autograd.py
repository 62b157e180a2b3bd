"""c10d.dist_autograd and c10d.optim.DistributedOptimizer between real processes, over torch's
autograd: a model-parallel network (one layer per worker) trained with dist_autograd.backward
and DistributedOptimizer equals, bit for bit, the same network trained in one process; contexts
are released everywhere they went; a worker lost after the forward fails the backward naming it.

Workers import this module to find the functions callers pass by reference."""

import threading

import pytest

import c10d
import world
from c10d import dist_autograd, rpc

torch = pytest.importorskip("torch")

INPUTS = [[1.0, 0.5, -0.5, 2.0], [0.3, -1.0, 0.7, 0.1], [-0.2, 0.4, 1.5, -0.8]]
_layer = None
_stop = threading.Event()


def build_layer(seed):
    global _layer
    torch.manual_seed(seed)
    _layer = torch.nn.Linear(3, 2).double()


def layer_parameter(index):
    """Through remote(): an RRef whose value is the parameter itself, on this worker."""
    return list(_layer.parameters())[index]


def layer_parameter_value(index):
    return list(_layer.parameters())[index].detach().clone()


def layer_forward(h):
    return _layer(h)


def live_contexts():
    return dist_autograd._live_contexts()


def stop():
    _stop.set()


def loss_of(out):
    return (out * out).sum() / 2


def run_model_parallel(rank, size):
    from c10d.optim import DistributedOptimizer
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=size)
    if rank == 0:
        torch.manual_seed(0)
        first = torch.nn.Linear(4, 3).double()
        rpc.rpc_sync("w1", build_layer, (1,))
        rrefs = [rpc.RRef(p) for p in first.parameters()]
        rrefs += [rpc.remote("w1", layer_parameter, (i,)) for i in range(2)]
        optimizer = DistributedOptimizer(torch.optim.SGD, rrefs, lr=0.1)
        losses = []
        for values in INPUTS:
            x = torch.tensor(values, dtype=torch.float64)
            with dist_autograd.context() as context_id:
                h = torch.tanh(first(x))
                out = rpc.rpc_sync("w1", layer_forward, (h,))
                loss = loss_of(out)
                dist_autograd.backward(context_id, [loss])
                # The gradients here are this worker's parameters'; .grad stays untouched.
                assert set(dist_autograd.get_gradients(context_id)) == set(first.parameters())
                assert all(p.grad is None for p in first.parameters())
                optimizer.step(context_id)
            losses.append(loss.item())

        torch.manual_seed(0)
        ref_first = torch.nn.Linear(4, 3).double()
        torch.manual_seed(1)
        ref_second = torch.nn.Linear(3, 2).double()
        reference = list(ref_first.parameters()) + list(ref_second.parameters())
        ref_optimizer = torch.optim.SGD(reference, lr=0.1)
        ref_losses = []
        for values in INPUTS:
            ref_optimizer.zero_grad()
            loss = loss_of(ref_second(torch.tanh(ref_first(torch.tensor(values,
                                                                          dtype=torch.float64)))))
            loss.backward()
            ref_optimizer.step()
            ref_losses.append(loss.item())
        assert losses == ref_losses
        assert ref_losses[-1] < ref_losses[0]
        trained = [p.detach() for p in first.parameters()]
        trained += [rpc.rpc_sync("w1", layer_parameter_value, (i,)) for i in range(2)]
        assert all(torch.equal(a, b.detach()) for a, b in zip(trained, reference))
        # Leaving each block released its context here and on w1.
        world.wait_until(
            lambda: live_contexts() == 0 and rpc.rpc_sync("w1", live_contexts) == 0)
        with pytest.raises(c10d.InvalidArgument, match="no context"):
            dist_autograd.backward(12345, [torch.ones((), requires_grad=True)])
        with dist_autograd.context() as context_id:
            with pytest.raises(c10d.InvalidArgument, match="scalar"):
                dist_autograd.backward(context_id, [torch.ones(2, requires_grad=True)])
    rpc.shutdown()
    return True


def test_model_parallel_training_equals_one_process_bit_for_bit():
    assert world.run(run_model_parallel, 2, init=False) == [True, True]


def run_lost_worker(rank, size):
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=size)
    if rank == 1:
        _stop.wait(30)
        return True  # its process ends without a graceful shutdown: the others lose it
    torch.manual_seed(0)
    first = torch.nn.Linear(4, 3).double()
    rpc.rpc_sync("w1", build_layer, (1,))
    with dist_autograd.context() as context_id:
        out = rpc.rpc_sync("w1", layer_forward, (torch.tanh(first(torch.ones(4,
                                                                        dtype=torch.float64))),))
        rpc.rpc_async("w1", stop)
        world.wait_until(lambda: not _reachable("w1"))
        with pytest.raises(c10d.RemoteError, match="w1"):
            dist_autograd.backward(context_id, [loss_of(out)])
    rpc.shutdown(graceful=False)
    return True


def _reachable(worker):
    try:
        rpc.rpc_sync(worker, live_contexts, timeout=5)
        return True
    except c10d.Error:
        return False


def test_a_worker_lost_after_the_forward_fails_the_backward_naming_it():
    assert world.run(run_lost_worker, 2, init=False) == [True, True]
