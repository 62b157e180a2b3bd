"""Collectives of picklable Python objects, as torch.distributed's.

Each object is pickled (protocol 5) into bytes; the ranks first exchange the sizes (int64), then
the bytes, padded to the largest, with the tensor collective of the same name.

Security: unpickling runs code the pickle names. These functions therefore trust every rank of
the job, exactly as torch.distributed's do: never use them in a job with ranks you do not trust.

The buffers are bytearray and array.array, so these need neither numpy nor torch; they run on
groups with a CPU backend (gloo, mpi).
"""

import pickle
from array import array

from . import distributed as _dist
from .errors import InvalidArgument


def _pickled(obj):
    return pickle.dumps(obj, protocol=5)


def _padded(data, size):
    return bytearray(data) + bytes(size - len(data))


def all_gather_object(object_list, obj, group=None):
    """Fills object_list (one slot per rank of group) with every rank's obj."""
    pg = _dist._group(group)
    if pg is None:
        return _dist._skipped(group, "all_gather_object")
    n = pg.size()
    if len(object_list) != n:
        raise InvalidArgument(f"all_gather_object: object_list has {len(object_list)} slots; "
                              f"the group has {n} ranks")
    data = _pickled(obj)
    sizes = array("q", [0]) * n
    _dist.all_gather_into_tensor(sizes, array("q", [len(data)]), group=group)
    longest = max(sizes)
    gathered = bytearray(longest * n)
    _dist.all_gather_into_tensor(gathered, _padded(data, longest), group=group)
    for r in range(n):
        object_list[r] = pickle.loads(gathered[r * longest:r * longest + sizes[r]])
    return None


def broadcast_object_list(object_list, src=0, group=None):
    """Replaces object_list's items, on every rank, with src's (every rank's list has src's
    length)."""
    pg = _dist._group(group)
    if pg is None:
        return _dist._skipped(group, "broadcast_object_list")
    is_src = pg.rank() == pg.group_rank(src, "src")
    pickles = [_pickled(obj) for obj in object_list] if is_src else []
    sizes = array("q", [len(p) for p in pickles] if is_src else [0] * len(object_list))
    _dist.broadcast(sizes, src, group=group)
    data = bytearray(b"".join(pickles)) if is_src else bytearray(sum(sizes))
    _dist.broadcast(data, src, group=group)
    if not is_src:
        offset = 0
        for i, size in enumerate(sizes):
            object_list[i] = pickle.loads(data[offset:offset + size])
            offset += size
    return None


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """Fills dst's object_gather_list (one slot per rank) with every rank's obj."""
    pg = _dist._group(group)
    if pg is None:
        return _dist._skipped(group, "gather_object")
    n = pg.size()
    is_dst = pg.rank() == pg.group_rank(dst, "dst")
    if is_dst and (object_gather_list is None or len(object_gather_list) != n):
        raise InvalidArgument(f"gather_object: object_gather_list on the destination needs {n} "
                              "slots, one per rank of the group")
    data = _pickled(obj)
    sizes = array("q", [0]) * n
    _dist.all_gather_into_tensor(sizes, array("q", [len(data)]), group=group)
    longest = max(sizes)
    slots = [bytearray(longest) for _ in range(n)] if is_dst else None
    _dist.gather(_padded(data, longest), slots, dst=dst, group=group)
    if is_dst:
        for r in range(n):
            object_gather_list[r] = pickle.loads(slots[r][:sizes[r]])
    return None


def scatter_object_list(scatter_object_output_list, scatter_object_input_list, src=0,
                        group=None):
    """Puts src's scatter_object_input_list[r] into scatter_object_output_list[0] on rank r."""
    pg = _dist._group(group)
    if pg is None:
        return _dist._skipped(group, "scatter_object_list")
    n = pg.size()
    if not scatter_object_output_list:
        raise InvalidArgument("scatter_object_list: scatter_object_output_list needs at least "
                              "one slot for the result")
    is_src = pg.rank() == pg.group_rank(src, "src")
    if is_src:
        if scatter_object_input_list is None or len(scatter_object_input_list) != n:
            raise InvalidArgument(f"scatter_object_list: scatter_object_input_list on the "
                                  f"source needs {n} objects, one per rank of the group")
        pickles = [_pickled(obj) for obj in scatter_object_input_list]
        sizes = array("q", [len(p) for p in pickles])
    else:
        sizes = array("q", [0]) * n
    _dist.broadcast(sizes, src, group=group)
    longest = max(sizes)
    inputs = [_padded(p, longest) for p in pickles] if is_src else None
    mine = bytearray(longest)
    _dist.scatter(mine, inputs, src=src, group=group)
    scatter_object_output_list[0] = pickle.loads(mine[:sizes[pg.rank()]])
    return None


def send_object_list(object_list, dst, group=None, device=None):
    """Sends object_list's objects to dst (a global rank), for its recv_object_list: the count,
    the sizes, then the bytes. device is accepted for torch's signature; buffers stay on the CPU."""
    pg = _dist._group(group)
    if pg is None:
        return _dist._skipped(group, "send_object_list")
    pickles = [_pickled(obj) for obj in object_list]
    _dist.send(array("q", [len(pickles)]), dst, group=group)
    if pickles:
        _dist.send(array("q", [len(p) for p in pickles]), dst, group=group)
        data = bytearray(b"".join(pickles))
        if data:
            _dist.send(data, dst, group=group)
    return None


def recv_object_list(object_list, src, group=None, device=None):
    """Fills object_list with what src (a global rank) sent with send_object_list, one object per
    slot, and returns src. A list of another length than was sent gets InvalidArgument (after
    the message is received, so the pair stays in step)."""
    pg = _dist._group(group)
    if pg is None:
        _dist._skipped(group, "recv_object_list")
        return -1
    count = array("q", [0])
    _dist.recv(count, src, group=group)
    if count[0] < 0:
        raise InvalidArgument(f"recv_object_list: rank {src} announced {count[0]} objects")
    sizes = array("q", [0]) * count[0]
    if count[0]:
        _dist.recv(sizes, src, group=group)
    if any(size < 0 for size in sizes):
        raise InvalidArgument(f"recv_object_list: rank {src} announced a negative size: "
                              f"{list(sizes)}")
    data = bytearray(sum(sizes))
    if data:
        _dist.recv(data, src, group=group)
    if len(object_list) != count[0]:
        raise InvalidArgument(f"recv_object_list: rank {src} sent {count[0]} objects; object_list "
                              f"has {len(object_list)} slots (give one per object sent)")
    offset = 0
    for i, size in enumerate(sizes):
        object_list[i] = pickle.loads(data[offset:offset + size])
        offset += size
    return src
