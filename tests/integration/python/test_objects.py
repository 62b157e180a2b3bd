"""The object collectives, with objects whose pickles differ in size from rank to rank."""

import world


def thing(rank):
    return {"rank": rank, "payload": "x" * (100 * rank), "nested": [rank, (rank, None)]}


def run_objects(rank, size):
    import c10d as dist
    everyone = [None] * size
    dist.all_gather_object(everyone, thing(rank))
    assert everyone == [thing(r) for r in range(size)]

    src = size - 1
    items = [thing(src), "text", 42] if rank == src else [None, None, None]
    dist.broadcast_object_list(items, src=src)
    assert items == [thing(src), "text", 42]

    dst = 1
    gathered = [None] * size if rank == dst else None
    dist.gather_object(thing(rank), gathered, dst=dst)
    if rank == dst:
        assert gathered == [thing(r) for r in range(size)]

    out = [None]
    dist.scatter_object_list(out, [thing(r) for r in range(size)] if rank == 0 else None, src=0)
    assert out == [thing(rank)]

    # a subgroup of the last two ranks; src/dst are global ranks
    pair = dist.new_group([size - 2, size - 1])
    if rank >= size - 2:
        pair_list = [None, None]
        dist.all_gather_object(pair_list, rank * 10, group=pair)
        assert pair_list == [(size - 2) * 10, (size - 1) * 10]
        box = ["from last"] if rank == size - 1 else [None]
        dist.broadcast_object_list(box, src=size - 1, group=pair)
        assert box == ["from last"]


def run_send_recv(rank, size):
    """A ring of send_object_list / recv_object_list, then a receiver with too few slots."""
    import pytest
    import c10d as dist
    right, left = (rank + 1) % size, (rank - 1) % size
    mine = [thing(rank), "text", [rank] * rank]
    got = [None] * 3
    if rank % 2 == 0:
        dist.send_object_list(mine, dst=right)
        assert dist.recv_object_list(got, src=left) == left
    else:
        assert dist.recv_object_list(got, src=left) == left
        dist.send_object_list(mine, dst=right)
    assert got == [thing(left), "text", [left] * left]
    # An empty list, and a receiver whose list is shorter than what was sent.
    if rank == 0:
        dist.send_object_list([], dst=1)
        dist.send_object_list([1, 2], dst=1)
    elif rank == 1:
        empty = []
        dist.recv_object_list(empty, src=0)
        assert empty == []
        with pytest.raises(dist.InvalidArgument, match="rank 0 sent 2 objects; object_list has 1"):
            dist.recv_object_list([None], src=0)
    dist.barrier()


def test_object_collectives():
    world.run(run_objects, 3)


def test_send_and_recv_object_list():
    world.run(run_send_recv, 2)
    world.run(run_send_recv, 4)
