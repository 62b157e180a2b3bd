"""Point-to-point: send/recv, recv from any rank, isend/irecv, tags, and a batch_isend_irecv
ring, on numpy arrays and torch tensors."""

import numpy as np
import pytest

import world


def message(src, dst, n=5):
    return np.arange(n, dtype=np.float32) + 100 * src + dst


def run_p2p(rank, size):
    import torch

    import c10d as dist
    for make in (np.array, torch.from_numpy):
        def zeros(n=5):
            return make(np.zeros(n, np.float32))

        # blocking: rank 0 sends to every other rank, which answers
        if rank == 0:
            for dst in range(1, size):
                dist.send(make(message(0, dst)), dst)
            for src in range(1, size):
                reply = zeros()
                assert dist.recv(reply, src) == src
                np.testing.assert_array_equal(np.asarray(reply), message(src, 0))
        else:
            got = zeros()
            assert dist.recv(got, 0) == 0
            np.testing.assert_array_equal(np.asarray(got), message(0, rank))
            dist.send(make(message(rank, 0)), 0)

        # recv from any rank: the return value names the sender
        if rank == 0:
            senders = set()
            for _ in range(size - 1):
                got = zeros()
                sender = dist.recv(got, tag=7)
                np.testing.assert_array_equal(np.asarray(got), message(sender, 0))
                senders.add(sender)
            assert senders == set(range(1, size))
        else:
            dist.send(make(message(rank, 0)), 0, tag=7)

        # isend/irecv to both neighbours at once; distinct tags keep the two messages apart
        right, left = (rank + 1) % size, (rank - 1) % size
        from_left, from_right = zeros(), zeros()
        works = [dist.irecv(from_left, left, tag=1), dist.irecv(from_right, right, tag=2),
                 dist.isend(make(message(rank, right)), right, tag=1),
                 dist.isend(make(message(rank, left)), left, tag=2)]
        for w in works:
            assert w.wait() is True
        assert works[0].is_completed() and works[0].source_rank() == left
        np.testing.assert_array_equal(np.asarray(from_left), message(left, rank))
        np.testing.assert_array_equal(np.asarray(from_right), message(right, rank))

        # irecv from any rank
        if rank == 1:
            got = zeros()
            work = dist.irecv(got)
            work.wait()
            assert work.source_rank() == 0
            np.testing.assert_array_equal(np.asarray(got), message(0, 1))
        elif rank == 0:
            dist.isend(make(message(0, 1)), 1).wait()

        # a ring as one batch
        got = zeros()
        ops = [dist.P2POp(dist.isend, make(message(rank, right)), right),
               dist.P2POp(dist.irecv, got, left)]
        works = dist.batch_isend_irecv(ops)
        assert len(works) == 2
        for w in works:
            w.wait()
        np.testing.assert_array_equal(np.asarray(got), message(left, rank))

        # in a subgroup, peers are still global ranks
        last = dist.new_group([0, size - 1])
        if rank == 0:
            dist.send(make(message(0, size - 1)), size - 1, group=last)
        elif rank == size - 1:
            got = zeros()
            assert dist.recv(got, 0, group=last) == 0
            np.testing.assert_array_equal(np.asarray(got), message(0, size - 1))
        dist.barrier()


@pytest.mark.parametrize("size", [2, 3])
def test_point_to_point(size):
    world.run(run_p2p, size)


def test_p2p_op_takes_only_isend_and_irecv():
    import c10d
    with pytest.raises(c10d.InvalidArgument, match="isend or c10d.irecv"):
        c10d.P2POp(c10d.send, np.zeros(1), 1)
