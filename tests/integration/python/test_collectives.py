"""Every collective at 2 and 3 ranks, on numpy arrays and torch tensors, against results the
test computes itself from what each rank contributed."""

import functools
import operator

import numpy as np
import pytest

import world


def contribution(rank, n=6, dtype=np.float32):
    """What rank puts in: distinct per rank, exact in every dtype used here."""
    return (np.arange(n) % 5 + 1 + 2 * rank).astype(dtype)


REDUCTIONS = {
    "SUM": functools.partial(functools.reduce, operator.add),
    "AVG": lambda xs: functools.reduce(operator.add, xs) / len(xs),
    "PRODUCT": functools.partial(functools.reduce, operator.mul),
    "MIN": functools.partial(functools.reduce, np.minimum),
    "MAX": functools.partial(functools.reduce, np.maximum),
    "BAND": functools.partial(functools.reduce, operator.and_),
    "BOR": functools.partial(functools.reduce, operator.or_),
    "BXOR": functools.partial(functools.reduce, operator.xor),
}
BITWISE = ("BAND", "BOR", "BXOR")


class Tensors:
    """Makes the test's arrays as numpy arrays or as torch tensors; reads either back."""

    def __init__(self, kind):
        self.kind = kind
        if kind == "torch":
            import torch
            self.torch = torch

    def of(self, array):
        array = np.ascontiguousarray(array)
        return self.torch.from_numpy(array.copy()) if self.kind == "torch" else array.copy()

    def zeros(self, shape, dtype=np.float32):
        return self.of(np.zeros(shape, dtype))

    @staticmethod
    def read(t):
        return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


def check_all_reduce(dist, tx, rank, size):
    everyone = [contribution(r, dtype=np.int32) for r in range(size)]
    for name, reduction in REDUCTIONS.items():
        dtype = np.float64 if name == "AVG" else np.int32
        t = tx.of(contribution(rank, dtype=dtype))
        assert dist.all_reduce(t, op=getattr(dist.ReduceOp, name)) is None
        np.testing.assert_array_equal(tx.read(t), reduction([e.astype(dtype) for e in everyone]),
                                      err_msg=name)
    t = tx.of(contribution(rank))
    dist.all_reduce(t, op=dist.premul_sum(0.5))
    np.testing.assert_array_equal(tx.read(t), sum(contribution(r) for r in range(size)) * 0.5)
    # dtypes other than float32, and a 0-d tensor
    for dtype in (np.float16, np.float64, np.int8, np.uint8, np.int16, np.int64):
        t = tx.of(contribution(rank, dtype=dtype))
        dist.all_reduce(t)
        expected = sum(contribution(r, dtype=np.int64) for r in range(size)).astype(dtype)
        np.testing.assert_array_equal(tx.read(t), expected, err_msg=str(dtype))
    flags = tx.of(np.array([rank == 0, False, True]))
    dist.all_reduce(flags, op=dist.ReduceOp.BOR)
    np.testing.assert_array_equal(tx.read(flags), [True, False, True])
    scalar = tx.of(np.array(rank + 1.0))
    dist.all_reduce(scalar, op=dist.ReduceOp.MAX)
    assert float(tx.read(scalar)) == size
    if tx.kind == "torch":
        t = tx.torch.full((4,), rank + 1.0, dtype=tx.torch.bfloat16)
        dist.all_reduce(t)
        assert t.float().tolist() == [size * (size + 1) / 2] * 4


def check_async(dist, tx, rank, size):
    t = tx.of(contribution(rank))
    work = dist.all_reduce(t, async_op=True)
    assert work.wait() is True
    assert work.is_completed() and work.is_success() and work.exception() is None
    np.testing.assert_array_equal(tx.read(t), sum(contribution(r) for r in range(size)))
    outputs = [tx.zeros(6) for _ in range(size)]
    works = [dist.all_gather(outputs, tx.of(contribution(rank)), async_op=True),
             dist.broadcast(t, src=size - 1, async_op=True),
             dist.barrier(async_op=True)]
    for w in works:
        w.wait()
    for r in range(size):
        np.testing.assert_array_equal(tx.read(outputs[r]), contribution(r))


def check_rooted(dist, tx, rank, size):
    for src in range(size):
        t = tx.of(contribution(rank))
        dist.broadcast(t, src)
        np.testing.assert_array_equal(tx.read(t), contribution(src))
    dst = size - 1
    for name in ("SUM", "MAX"):
        t = tx.of(contribution(rank))
        dist.reduce(t, dst, op=getattr(dist.ReduceOp, name))
        if rank == dst:
            expected = REDUCTIONS[name]([contribution(r) for r in range(size)])
            np.testing.assert_array_equal(tx.read(t), expected)
    gathered = [tx.zeros(6) for _ in range(size)] if rank == dst else None
    dist.gather(tx.of(contribution(rank)), gathered, dst=dst)
    if rank == dst:
        for r in range(size):
            np.testing.assert_array_equal(tx.read(gathered[r]), contribution(r))
    pieces = [tx.of(contribution(r) * 10) for r in range(size)] if rank == 0 else None
    mine = tx.zeros(6)
    dist.scatter(mine, pieces, src=0)
    np.testing.assert_array_equal(tx.read(mine), contribution(rank) * 10)


def check_gathers_and_scatters(dist, tx, rank, size):
    outputs = [tx.zeros(6) for _ in range(size)]
    dist.all_gather(outputs, tx.of(contribution(rank)))
    for r in range(size):
        np.testing.assert_array_equal(tx.read(outputs[r]), contribution(r))
    flat = tx.zeros(6 * size)
    dist.all_gather_into_tensor(flat, tx.of(contribution(rank)))
    np.testing.assert_array_equal(tx.read(flat), np.concatenate([contribution(r)
                                                                 for r in range(size)]))
    # rank r's i-th input is block(r, i); output i is the sum over ranks of their input i
    def block(r, i):
        return contribution(r, 3) * (i + 1)

    out = tx.zeros(3)
    dist.reduce_scatter(out, [tx.of(block(rank, i)) for i in range(size)])
    np.testing.assert_array_equal(tx.read(out), sum(block(r, rank) for r in range(size)))
    out = tx.zeros(3)
    dist.reduce_scatter_tensor(out, tx.of(np.concatenate([block(rank, i) for i in range(size)])),
                               op=dist.ReduceOp.MAX)
    np.testing.assert_array_equal(tx.read(out), np.max([block(r, rank) for r in range(size)], 0))


def check_all_to_all(dist, tx, rank, size):
    # rank r sends message(r, d) to rank d
    def message(r, d):
        return np.full(2, 10 * r + d, np.float32)

    outputs = [tx.zeros(2) for _ in range(size)]
    dist.all_to_all(outputs, [tx.of(message(rank, d)) for d in range(size)])
    for r in range(size):
        np.testing.assert_array_equal(tx.read(outputs[r]), message(r, rank))
    out = tx.zeros(2 * size)
    dist.all_to_all_single(out, tx.of(np.concatenate([message(rank, d) for d in range(size)])))
    np.testing.assert_array_equal(tx.read(out), np.concatenate([message(r, rank)
                                                                for r in range(size)]))
    # Uneven splits count rows of a 2-D tensor: rank r sends d + 1 rows of 3 to rank d.
    def rows(r, d):
        return np.full((d + 1, 3), 10 * r + d, np.float32)

    sent = np.concatenate([rows(rank, d) for d in range(size)])
    received = tx.zeros(((rank + 1) * size, 3))
    dist.all_to_all_single(received, tx.of(sent), [rank + 1] * size,
                           [d + 1 for d in range(size)])
    np.testing.assert_array_equal(tx.read(received),
                                  np.concatenate([rows(r, rank) for r in range(size)]))


def check_subgroups(dist, tx, rank, size):
    ends = dist.new_group([size - 1, 0])  # sorted, as torch.distributed sorts them
    everyone = dist.new_group()
    assert dist.get_world_size(everyone) == size and dist.get_rank(everyone) == rank
    t = tx.of(contribution(rank))
    if rank in (0, size - 1):
        assert dist.get_process_group_ranks(ends) == [0, size - 1]
        assert dist.get_rank(ends) == (0 if rank == 0 else 1)
        assert dist.get_world_size(ends) == 2
        dist.all_reduce(t, group=ends)
        np.testing.assert_array_equal(tx.read(t), contribution(0) + contribution(size - 1))
        b = tx.of(contribution(rank))
        dist.broadcast(b, src=size - 1, group=ends)  # src is a global rank
        np.testing.assert_array_equal(tx.read(b), contribution(size - 1))
        outputs = [tx.zeros(6) for _ in range(2)]
        dist.all_gather(outputs, tx.of(contribution(rank)), group=ends)
        np.testing.assert_array_equal(tx.read(outputs[1]), contribution(size - 1))
    else:
        assert ends is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(ends) == -1 and dist.get_world_size(ends) == -1
        with pytest.warns(UserWarning, match="not in the group"):
            assert dist.all_reduce(t, group=ends) is None
        np.testing.assert_array_equal(tx.read(t), contribution(rank))  # untouched
    dist.all_reduce(t, group=everyone)
    dist.barrier(group=everyone)
    dist.destroy_process_group(everyone)


def run_all(rank, size):
    import c10d as dist
    assert dist.is_initialized() and dist.get_backend() == dist.Backend.GLOO
    assert dist.get_rank() == rank and dist.get_world_size() == size
    for kind in ("numpy", "torch"):
        tx = Tensors(kind)
        for check in (check_all_reduce, check_async, check_rooted, check_gathers_and_scatters,
                      check_all_to_all, check_subgroups):
            check(dist, tx, rank, size)
    dist.barrier()
    dist.monitored_barrier(wait_all_ranks=True)


@pytest.mark.parametrize("size", [2, 3])
def test_every_collective(size):
    world.run(run_all, size)


def tutorial_reduce_op(rank, size):
    """PyTorch's distributed tutorial as still widely taught: op=dist.reduce_op.SUM."""
    import warnings
    import c10d as dist
    t = np.full(4, rank + 1, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.all_reduce(t, op=dist.reduce_op.SUM)
    np.testing.assert_array_equal(t, np.full(4, size * (size + 1) / 2, dtype=np.float32))
    assert any(issubclass(w.category, DeprecationWarning) and "c10d.ReduceOp" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    assert dist.reduce_op.MAX is dist.ReduceOp.MAX
    with pytest.raises(AttributeError, match="reduce_op has no member 'MEAN'.*SUM"):
        dist.reduce_op.MEAN


def test_reduce_op_of_old_tutorials_still_works():
    world.run(tutorial_reduce_op, 2)


def subgroups_of_two(rank, size):
    import c10d as dist
    mine, everyone = dist.new_subgroups(2)
    assert len(everyone) == size // 2
    assert dist.get_process_group_ranks(mine) == [rank - rank % 2, rank - rank % 2 + 1]
    t = np.full(1, rank + 1, dtype=np.int64)
    dist.all_reduce(t, group=mine)
    assert t[0] == (rank - rank % 2 + 1) + (rank - rank % 2 + 2)
    # By enumeration: {3, 0} and {1}; rank 2 is in none.
    mine, everyone = dist.new_subgroups_by_enumeration([[3, 0], [1]])
    assert len(everyone) == 2
    assert (mine is None) == (rank == 2)
    if mine is not None:
        t = np.full(1, rank + 1, dtype=np.int64)
        dist.all_reduce(t, group=mine)
        assert t[0] == (5 if rank in (0, 3) else 2)
    with pytest.raises(dist.InvalidArgument, match="group size 3 does not divide the 4 ranks"):
        dist.new_subgroups(3)
    with pytest.raises(dist.InvalidArgument, match=r"rank 1 is in subgroup 0 \[0, 1\] and in subgroup 1"):
        dist.new_subgroups_by_enumeration([[0, 1], [1]])


def test_new_subgroups_at_four_ranks():
    world.run(subgroups_of_two, 4)


def device_mesh_2x2(rank, size):
    import c10d as dist
    mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    assert mesh.get_coordinate() == [rank // 2, rank % 2]
    assert mesh.mesh == [[0, 1], [2, 3]]
    assert dist.get_process_group_ranks(mesh.get_group("tp")) == [rank // 2 * 2, rank // 2 * 2 + 1]
    assert dist.get_process_group_ranks(mesh.get_group("dp")) == [rank % 2, rank % 2 + 2]
    t = np.full(1, 1 << rank, dtype=np.int64)
    dist.all_reduce(t, group=mesh["dp"].get_group())
    assert t[0] == (1 << (rank % 2)) | (1 << (rank % 2 + 2))
    assert mesh["tp"].mesh == [rank // 2 * 2, rank // 2 * 2 + 1]
    assert mesh["dp"].get_local_rank() == rank // 2
    with pytest.raises(dist.InvalidArgument, match="not in the mesh's order"):
        mesh["tp", "dp"]
    with pytest.raises(dist.InvalidArgument, match="no dimension named 'pp'"):
        mesh.get_group("pp")
    with pytest.raises(dist.InvalidArgument, match=r"makes 2 ranks; the default group has 4"):
        dist.init_device_mesh("cpu", (2, 1))
    with pytest.raises(dist.InvalidArgument, match="repeat"):
        dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("x", "x"))
    column = dist.init_device_mesh("cpu", (4, 1))
    assert column.get_coordinate() == [rank, 0]
    assert dist.get_process_group_ranks(column.get_group(0)) == [0, 1, 2, 3]


def test_device_mesh_2x2_and_4x1():
    world.run(device_mesh_2x2, 4)


def _coalesced(rank, world_size):
    import numpy
    import c10d
    separate = [numpy.full(i + 1, 0.1 * (rank + 1) / (i + 3) + i, dtype=numpy.float32)
                for i in range(50)]
    for t in separate:
        c10d.all_reduce(t)
    coalesced = [numpy.full(i + 1, 0.1 * (rank + 1) / (i + 3) + i, dtype=numpy.float32)
                 for i in range(50)]
    with c10d._coalescing_manager():
        for t in coalesced:
            assert c10d.all_reduce(t) is None
    assert all((a.tobytes() == b.tobytes()) for a, b in zip(separate, coalesced))
    later = [numpy.ones(3, dtype=numpy.float32) for _ in range(3)]
    with c10d._coalescing_manager(async_ops=True) as cm:
        for t in later:
            c10d.all_reduce(t)
    cm.wait()
    assert all((t == world_size).all() for t in later)
    with pytest.raises(c10d.InvalidArgument, match="allreduces only"):
        with c10d._coalescing_manager():
            c10d.broadcast(numpy.ones(2, dtype=numpy.float32), 0)
    return True


def test_coalescing_manager_equals_separate_all_reduces():
    assert world.run(_coalesced, 2) == [True, True]
