"""Errors: each failure raises the c10d exception class of its status, with the C++ text."""

from datetime import timedelta

import numpy as np
import pytest

import world


def run_errors(rank, size):
    import torch

    import c10d as dist
    a = np.zeros(4, np.float32)

    with pytest.raises(dist.InvalidArgument, match=r"destination 5 .*range") as bad_rank:
        dist.send(a, 5)
    assert isinstance(bad_rank.value, ValueError)  # torch raises ValueError/RuntimeError here
    with pytest.raises(dist.InvalidArgument, match=r"rank \d cannot send to itself"):
        dist.send(a, rank)
    with pytest.raises(dist.InvalidArgument, match="root 9"):
        dist.broadcast(a, 9)
    pair = dist.new_group([0, 1])
    with pytest.raises(dist.InvalidArgument, match="src 9 is not a member"):
        dist.broadcast(a, 9, group=pair)

    # a receive nobody answers: the wait times out and the receive stays pending
    if rank == 0:
        work = dist.irecv(a, 1, tag=99)
        with pytest.raises(dist.TimeoutError, match="recv.*tag 99") as late:
            work.wait(timedelta(milliseconds=200))
        assert isinstance(late.value, TimeoutError)
        assert not work.is_completed() and work.exception() is None
        dist.barrier()
        # rank 1 sends now; the receive completes and the buffer is still alive
        work.wait()
        np.testing.assert_array_equal(a, [1, 2, 3, 4])
    else:
        dist.barrier()
        dist.send(np.array([1, 2, 3, 4], np.float32), 0, tag=99)

    with pytest.raises(dist.InvalidArgument, match="not contiguous"):
        dist.all_reduce(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(dist.InvalidArgument, match="not contiguous"):
        dist.all_reduce(torch.zeros(4, 4).t())
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(dist.InvalidArgument, match="read-only"):
        dist.all_reduce(frozen)
    with pytest.raises(dist.InvalidArgument, match="read-only"):
        dist.recv(bytes(16), 1 - rank)
    with pytest.raises(dist.InvalidArgument, match="complex64.*not support"):
        dist.all_reduce(np.zeros(2, np.complex64))
    with pytest.raises(dist.InvalidArgument, match="not a tensor"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(dist.InvalidArgument, match="ReduceOp"):
        dist.all_reduce(a, op="sum")
    with pytest.raises(dist.InvalidArgument, match="expected 2 output tensors"):
        dist.all_gather([a], a)  # one output for two ranks
    with pytest.raises(dist.StateError, match="already initialized"):
        dist.init_process_group("gloo")

    # a destroyed subgroup, then the default group, cannot be used any more
    dist.destroy_process_group(pair)
    with pytest.raises(dist.StateError, match="destroyed"):
        dist.all_reduce(a, group=pair)
    world_group = dist.group.WORLD
    dist.barrier()
    dist.destroy_process_group()
    assert not dist.is_initialized() and dist.group.WORLD is None
    with pytest.raises(dist.StateError, match="not initialized"):
        dist.all_reduce(a)
    with pytest.raises(dist.StateError, match="destroyed"):
        dist.all_reduce(a, group=world_group)
    with pytest.raises(RuntimeError):
        dist.get_rank()


def test_errors():
    world.run(run_errors, 2)


def test_not_initialized():
    import c10d
    with pytest.raises(c10d.StateError, match="init_process_group"):
        c10d.barrier()
    with pytest.raises(c10d.InvalidArgument, match="rank"):
        c10d.init_process_group(store=c10d.HashStore())
