"""torch.distributed's process-group API over libc10d_c.

Ranks given to these functions (src, dst, peer, new_group's ranks) are global ranks, ranks in the
default group, as in torch.distributed; each subgroup keeps its members' global ranks to
translate. A rank that calls an operation on a group it is not a member of gets a warning and
None, as torch.distributed does.

Tensors are torch.Tensor (CPU or CUDA), numpy.ndarray, objects with __dlpack__, or buffers
(bytearray, array.array): c10d reads and writes their memory in place. With async_op=True the
returned Work keeps them alive until the operation has completed.
"""

import contextlib
import enum
import os
import warnings
from ctypes import byref, c_int, c_int64, c_void_p
from datetime import timedelta

from . import _capi
from . import errorfile as _errorfile
from ._capi import lib
from ._tensors import buffer as _buffer, buffers as _buffers, row_elements as _row_elements
from .errors import InvalidArgument, StateError
from .store import milliseconds as _milliseconds

default_pg_timeout = timedelta(minutes=30)


class Backend(str):
    """A backend name ("gloo", "nccl", "mpi", or a spec such as "cpu:gloo,cuda:nccl")."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"

    def __new__(cls, name):
        return super().__new__(cls, name.lower())


class ReduceOp(enum.IntEnum):
    """Reductions; values are c10d_reduce_op's."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class _DeprecatedReduceOp:
    """reduce_op: ReduceOp under its old name, which torch.distributed keeps with a warning and
    which tutorials still write (dist.all_reduce(t, op=dist.reduce_op.SUM))."""

    def __getattr__(self, name):
        warnings.warn("c10d.reduce_op is deprecated, please use c10d.ReduceOp instead",
                      DeprecationWarning, stacklevel=2)
        try:
            return ReduceOp[name]
        except KeyError:
            raise AttributeError(f"reduce_op has no member {name!r}; ReduceOp's are "
                                 f"{', '.join(ReduceOp.__members__)}") from None

    def __repr__(self):
        return "c10d.reduce_op (deprecated: use c10d.ReduceOp)"


reduce_op = _DeprecatedReduceOp()


class _PremulSum:
    """PREMUL_SUM with its factor: the sum over ranks of factor * input."""

    __slots__ = ("factor",)

    def __init__(self, factor):
        self.factor = float(factor)

    def __repr__(self):
        return f"premul_sum({self.factor})"


def premul_sum(factor):
    """The reduction that sums factor * each rank's input (factor: a number or 1-element tensor)."""
    return _PremulSum(factor)


_make_nccl_premul_sum = premul_sum  # the name torch.distributed gives it

# The option structs every call with default root and tag may share (SUM needs none).
_REDUCE_OPTIONS = {op: (None if op is ReduceOp.SUM else _capi.op_options(reduce_op=op))
                   for op in ReduceOp}
_MISSING = object()


def _options(reduce_op=ReduceOp.SUM, root=0, tag=0):
    """The c10d_op_options for these settings (None: the defaults)."""
    if isinstance(reduce_op, _PremulSum):
        return _capi.op_options(ReduceOp.PREMUL_SUM, reduce_op.factor, root, tag)
    try:
        shared = _REDUCE_OPTIONS.get(reduce_op, _MISSING)
    except TypeError:  # unhashable
        shared = _MISSING
    if shared is _MISSING:
        raise InvalidArgument(f"op: {reduce_op!r} is not a c10d.ReduceOp or premul_sum(factor)")
    if root == 0 and tag == 0:
        return shared
    return _capi.op_options(int(reduce_op), 1.0, root, tag)


class ProcessGroup:
    """A c10d group of this process: its handle, and its members' global ranks."""

    __slots__ = ("_handle", "_rank", "_size", "_ranks", "_rank_of", "__weakref__")

    def __init__(self, handle, ranks=None):
        self._handle = handle
        self._rank = lib.c10d_group_rank(handle)
        self._size = lib.c10d_group_size(handle)
        # None for the default group, whose ranks are the global ranks.
        self._ranks = ranks
        self._rank_of = None if ranks is None else {g: i for i, g in enumerate(ranks)}

    def __del__(self, _free=lib.c10d_group_free):
        handle, self._handle = self._handle, None
        if handle:
            _free(handle)

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    @property
    def handle(self):
        """The c10d_group* (an int), for calls of the C API."""
        return self._handle

    def ranks(self):
        """The global rank of each member, in group-rank order."""
        return list(range(self._size)) if self._ranks is None else list(self._ranks)

    def backend(self):
        return Backend(lib.c10d_group_backend(self._handle).decode())

    def group_rank(self, global_rank, what="rank"):
        if self._rank_of is None:
            return global_rank
        rank = self._rank_of.get(global_rank)
        if rank is None:
            raise InvalidArgument(f"{what} {global_rank} is not a member of this group (its "
                                  f"global ranks are {self._ranks})")
        return rank

    def global_rank(self, group_rank):
        return group_rank if self._ranks is None else self._ranks[group_rank]

    def _destroy(self):
        handle, self._handle = self._handle, None
        if handle:
            lib.c10d_group_free(handle)

    def __repr__(self):
        state = "destroyed" if self._handle is None else f"rank {self._rank} of {self._size}"
        return f"<c10d.ProcessGroup {self.ranks()}: {state}>"


class GroupMember:
    WORLD = None  # the default group once init_process_group has made it
    NON_GROUP_MEMBER = object()  # what new_group returns to the ranks it leaves out


class group:
    WORLD = None  # the same as GroupMember.WORLD


_world = None
_subgroups = []


def _set_world(pg):
    global _world
    _world = GroupMember.WORLD = group.WORLD = pg


def _group(group_):
    """The ProcessGroup an operation runs on, or None when this rank is not in group_."""
    if group_ is None or group_ is GroupMember.WORLD:
        if _world is None:
            raise StateError("the default process group is not initialized; call "
                             "c10d.init_process_group() first")
        return _world
    if group_ is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group_, ProcessGroup):
        raise InvalidArgument(f"group: {group_!r} is not a c10d process group")
    if group_._handle is None:
        raise StateError(f"{group_!r} was destroyed (destroy_process_group); create a new one")
    return group_


def _skipped(group_, op):
    """What an operation returns on a rank outside its group (raises when there is no group)."""
    if group_ is None:
        _group(None)
    warnings.warn(f"c10d.{op}: global rank {_world.rank() if _world else -1} is not in the "
                  "group; the call does nothing here", stacklevel=3)
    return None


# ---- work ----

_orphans = []  # (handle, what keeps its memory) of Works dropped before their op completed


def _reap_orphans():
    done = c_int()
    for entry in list(_orphans):
        lib.c10d_work_is_completed(entry[0], byref(done))
        if done.value:
            _orphans.remove(entry)
            lib.c10d_work_free(entry[0])


class Work:
    """A started operation: what async_op=True, isend and irecv return."""

    __slots__ = ("_handle", "_group", "_keep", "__weakref__")

    def __init__(self, handle, group_, keep):
        if _orphans:
            _reap_orphans()
        self._handle = handle
        self._group = group_
        self._keep = keep  # the tensors (and buffer exports) the op reads and writes

    def wait(self, timeout=None):
        """Blocks until the operation completes (or timeout, a timedelta, passes); raises its
        error. A timeout leaves the operation running."""
        status = lib.c10d_work_wait(self._handle, _milliseconds(timeout))
        if status:
            raise _capi.error(status)
        self._keep = None
        return True

    def _test(self):
        done = c_int()
        status = lib.c10d_work_is_completed(self._handle, byref(done))
        return bool(done.value), status

    def is_completed(self):
        return self._test()[0]

    def is_success(self):
        done, status = self._test()
        return done and status == _capi.OK

    def exception(self):
        """The error the operation completed with, or None (also while it runs)."""
        done, status = self._test()
        return _capi.error(status) if done and status else None

    def source_rank(self):
        """The global rank a completed receive came from."""
        rank = c_int()
        _capi.check(lib.c10d_work_source_rank(self._handle, byref(rank)))
        return self._group.global_rank(rank.value)

    # Everything it uses is bound as a default: it may run while the interpreter shuts down.
    def __del__(self, _test=lib.c10d_work_is_completed, _free=lib.c10d_work_free, _flag=c_int,
                _orphans=_orphans):
        handle, self._handle = self._handle, None
        if not handle:
            return
        if self._keep is not None:
            done = _flag()
            _test(handle, done)
            if not done.value:
                # Freeing now would let the caller's memory go while the op still uses it.
                _orphans.append((handle, self._keep))
                return
        _free(handle)


def _run(call, pg, args, async_op, keep):
    if not async_op:
        _capi.check(call(pg._handle, *args, None))
        return None
    return Work(_capi.created(call, pg._handle, *args), pg, keep)


# ---- the default group, subgroups, queries ----

def is_available():
    return True


def is_initialized():
    return _world is not None


def init_process_group(backend=None, init_method=None, timeout=default_pg_timeout, world_size=-1,
                       rank=-1, store=None, group_name="", pg_options=None):
    """Creates the default group; every rank calls it. Without store, init_method (default
    env://: MASTER_ADDR, MASTER_PORT, and RANK/WORLD_SIZE unless given) finds the others."""
    if _world is not None:
        raise StateError("init_process_group: the default process group is already "
                         "initialized; call destroy_process_group() first")
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):
        _errorfile.install_excepthook()
    timeout_ms = _milliseconds(timeout, 0)
    name = group_name.encode() if group_name else None
    if store is not None:
        if init_method is not None:
            raise InvalidArgument("init_process_group: give init_method or store, not both")
        if rank < 0 or world_size <= 0:
            raise InvalidArgument(f"init_process_group: with a store, give rank (>= 0, not {rank}) "
                                  f"and world_size (> 0, not {world_size})")
        spec = backend or os.environ.get("C10D_BACKEND") or Backend.GLOO
        options = _capi.group_options(backend=str(spec).encode(), timeout_ms=timeout_ms,
                                      group_name=name)
        handle = _capi.created(lib.c10d_group_create, store.handle, rank, world_size, options)
    else:
        options = _capi.init_options(
            backend=str(backend).encode() if backend else None,
            init_method=init_method.encode() if init_method else None, rank=rank,
            world_size=world_size, timeout_ms=timeout_ms, group_name=name)
        handle = _capi.created(lib.c10d_group_init, options)
    _set_world(ProcessGroup(handle))


def destroy_process_group(group=None):
    """Releases group; the default group (None) takes every subgroup with it."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group is None or group is GroupMember.WORLD:
        world = _group(None)
        for sub in _subgroups:
            sub._destroy()
        _subgroups.clear()
        world._destroy()
        _set_world(None)
        return
    pg = _group(group)
    pg._destroy()
    if pg in _subgroups:
        _subgroups.remove(pg)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A group of the given global ranks (None: all). Every rank of the default group calls it,
    in the same order; ranks left out get GroupMember.NON_GROUP_MEMBER."""
    world = _group(None)
    members = list(range(world._size)) if ranks is None else sorted(int(r) for r in ranks)
    options = None
    if timeout is not None or backend is not None:
        options = _capi.group_options(backend=str(backend).encode() if backend else None,
                                      timeout_ms=_milliseconds(timeout, 0))
    array = (c_int * len(members))(*members)
    handle = _capi.created(lib.c10d_group_new, world._handle, array, len(members), options)
    if not lib.c10d_group_is_member(handle):
        lib.c10d_group_free(handle)
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(handle, members)
    _subgroups.append(pg)
    return pg


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None,
                                 pg_options=None):
    """One group per list of global ranks, made by every rank of the default group; returns
    (the subgroup this rank is in, or None, and every subgroup). A rank may be in one list only."""
    world = _group(None)
    lists = [list(ranks) for ranks in ranks_per_subgroup_list]
    if not lists:
        raise InvalidArgument("new_subgroups_by_enumeration: no subgroups given")
    seen = {}
    for i, ranks in enumerate(lists):
        if not ranks:
            raise InvalidArgument(f"new_subgroups_by_enumeration: subgroup {i} has no ranks")
        for r in ranks:
            if not 0 <= r < world._size:
                raise InvalidArgument(f"new_subgroups_by_enumeration: rank {r} of subgroup {i} "
                                      f"{ranks} is not in the default group (size {world._size})")
            if r in seen:
                raise InvalidArgument(f"new_subgroups_by_enumeration: rank {r} is in subgroup "
                                      f"{seen[r]} {lists[seen[r]]} and in subgroup {i} {ranks}; "
                                      "a rank may be in one subgroup only")
            seen[r] = i
    mine, subgroups = None, []
    for ranks in lists:
        subgroups.append(new_group(ranks, timeout=timeout, backend=backend, pg_options=pg_options))
        if world._rank in ranks:
            mine = subgroups[-1]
    return mine, subgroups


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None):
    """The default group's ranks cut into consecutive subgroups of group_size (None: this node's
    LOCAL_WORLD_SIZE, where torch takes the node's CUDA device count); returns (this rank's
    subgroup, every subgroup)."""
    if group is not None and group is not GroupMember.WORLD:
        raise InvalidArgument("new_subgroups: group must be the default group (as in torch)")
    world = _group(None)
    if group_size is None:
        local = os.environ.get("LOCAL_WORLD_SIZE")
        if not local:
            raise InvalidArgument("new_subgroups: give group_size (LOCAL_WORLD_SIZE is not set)")
        group_size = int(local)
    if group_size <= 0 or world._size % group_size:
        raise InvalidArgument(f"new_subgroups: group size {group_size} does not divide the "
                              f"{world._size} ranks of the default group; give a positive "
                              "divisor of the size")
    return new_subgroups_by_enumeration(
        [list(range(i, i + group_size)) for i in range(0, world._size, group_size)],
        timeout=timeout, backend=backend, pg_options=pg_options)


def get_rank(group=None):
    """This process's rank in group (-1 when not a member)."""
    pg = _group(group)
    return -1 if pg is None else pg._rank


def get_world_size(group=None):
    """The number of ranks in group (-1 when this rank is not a member)."""
    pg = _group(group)
    return -1 if pg is None else pg._size


def get_backend(group=None):
    pg = _group(group)
    if pg is None:
        raise InvalidArgument("get_backend: this rank is not in the group")
    return pg.backend()


def get_process_group_ranks(group):
    """The global ranks of group's members, in group-rank order."""
    pg = _group(group)
    if pg is None:
        raise InvalidArgument("get_process_group_ranks: this rank is not in the group")
    return pg.ranks()


def get_global_rank(group, group_rank):
    return get_process_group_ranks(group)[group_rank]


def get_group_rank(group, global_rank):
    pg = _group(group)
    if pg is None:
        raise InvalidArgument("get_group_rank: this rank is not in the group")
    return pg.group_rank(global_rank)


# ---- collectives ----

_allreduce = lib.c10d_allreduce


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    pg = _world if group is None else _group(group)
    if pg is None:
        return _skipped(group, "all_reduce")
    buf = _buffer(tensor, "tensor", True)
    options = _REDUCE_OPTIONS[op] if op.__class__ is ReduceOp else _options(op)
    if not async_op:
        status = _allreduce(pg._handle, buf, options, None)
        if status:
            raise _capi.error(status)
        if _held is not None:  # in a coalescing block: the op runs at its end
            _held.append((tensor, buf))
        return None
    return _run(_allreduce, pg, (buf, options), True, (tensor, buf))


# The tensors (and buffer exports) of the blocking all_reduces held by open coalescing blocks,
# kept until the fused op is done with them.
_held = None


class _CoalescingManager:
    """What _coalescing_manager yields: works (the fused op's Work with async_ops) and wait()."""

    def __init__(self):
        self.works = []

    def append(self, work):
        if work:
            self.works.append(work)

    def wait(self):
        for work in self.works:
            work.wait()
        self.works = []


@contextlib.contextmanager
def _coalescing_manager(group=None, device=None, async_ops=False):
    """torch's _coalescing_manager: the all_reduces issued inside run as one fused op at the
    block's end (one message per step instead of one per tensor). Without async_ops the end waits
    for it; with async_ops, cm.wait() does. Only all_reduces of one dtype, device and reduce op
    may be issued inside (anything else raises InvalidArgument on every rank); device is
    accepted for torch's signature (the tensors' device decides). If the block raises, the ops it
    held are still issued, so that ranks stay in step, and the error propagates."""
    global _held
    pg = _group(group)
    cm = _CoalescingManager()
    if pg is None:  # not a member: nothing to coalesce
        yield cm
        return
    _capi.check(lib.c10d_group_start_coalescing(pg._handle))
    outer, _held = _held, []
    keep = _held
    try:
        yield cm
    finally:
        _held = outer
        work = Work(_capi.created(lib.c10d_group_end_coalescing, pg._handle), pg, keep)
    if async_ops:
        cm.append(work)
    else:
        work.wait()


def broadcast(tensor, src, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "broadcast")
    root = pg.group_rank(src, "src")
    buf = _buffer(tensor, "tensor", pg._rank != root)
    return _run(lib.c10d_broadcast, pg, (buf, _options(root=root)), async_op, (tensor, buf))


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "reduce")
    options = _options(op, root=pg.group_rank(dst, "dst"))
    buf = _buffer(tensor, "tensor", True)
    return _run(lib.c10d_reduce, pg, (buf, options), async_op, (tensor, buf))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "all_gather")
    outputs = _buffers(tensor_list, "tensor_list", True)
    buf = _buffer(tensor, "tensor", False)
    return _run(lib.c10d_allgather, pg, (outputs, len(outputs), buf, None), async_op,
                (tensor_list, tensor, outputs, buf))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "all_gather_into_tensor")
    out = _buffer(output_tensor, "output_tensor", True)
    buf = _buffer(input_tensor, "input_tensor", False)
    return _run(lib.c10d_allgather_into_tensor, pg, (out, buf, None), async_op,
                (output_tensor, input_tensor, out, buf))


def _root_list(pg, root, items, name, writable):
    """The root's list argument as buffers, (None, 0) elsewhere (where it must be empty)."""
    if pg._rank == root:
        if items is None:
            raise InvalidArgument(f"{name} is required on the root rank")
        array = _buffers(items, name, writable)
        return array, len(array)
    if items:
        raise InvalidArgument(f"{name} must not be given on ranks other than the root")
    return None, 0


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "gather")
    root = pg.group_rank(dst, "dst")
    outputs, count = _root_list(pg, root, gather_list, "gather_list", True)
    buf = _buffer(tensor, "tensor", False)
    return _run(lib.c10d_gather, pg, (outputs, count, buf, _options(root=root)), async_op,
                (gather_list, tensor, outputs, buf))


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "scatter")
    root = pg.group_rank(src, "src")
    inputs, count = _root_list(pg, root, scatter_list, "scatter_list", False)
    out = _buffer(tensor, "tensor", True)
    return _run(lib.c10d_scatter, pg, (out, inputs, count, _options(root=root)), async_op,
                (scatter_list, tensor, inputs, out))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "reduce_scatter")
    out = _buffer(output, "output", True)
    inputs = _buffers(input_list, "input_list", False)
    return _run(lib.c10d_reduce_scatter, pg, (out, inputs, len(inputs), _options(op)), async_op,
                (output, input_list, out, inputs))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "reduce_scatter_tensor")
    out = _buffer(output, "output", True)
    buf = _buffer(input, "input", False)
    return _run(lib.c10d_reduce_scatter_tensor, pg, (out, buf, _options(op)), async_op,
                (output, input, out, buf))


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "all_to_all")
    outputs = _buffers(output_tensor_list, "output_tensor_list", True)
    inputs = _buffers(input_tensor_list, "input_tensor_list", False)
    return _run(lib.c10d_alltoall, pg, (outputs, len(outputs), inputs, len(inputs), None),
                async_op, (output_tensor_list, input_tensor_list, outputs, inputs))


def _element_splits(rows, tensor, count, size, name):
    """torch's split sizes (dim-0 rows; None: equal) as the C API's element counts."""
    if rows is None:
        if count % size:
            raise InvalidArgument(f"{name} is None, so the tensor is split equally, but its "
                                  f"{count} elements do not divide by the group's size {size}")
        return [count // size] * size
    per_row = _row_elements(tensor)
    return [int(r) * per_row for r in rows]


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "all_to_all_single")
    out = _buffer(output, "output", True)
    buf = _buffer(input, "input", False)
    out_splits = in_splits = None
    count = 0
    if output_split_sizes is not None or input_split_sizes is not None:
        outs = _element_splits(output_split_sizes, output, out.count, pg._size,
                               "output_split_sizes")
        ins = _element_splits(input_split_sizes, input, buf.count, pg._size, "input_split_sizes")
        if len(outs) != len(ins):
            raise InvalidArgument(f"output_split_sizes has {len(outs)} entries and "
                                  f"input_split_sizes {len(ins)}; each needs one per rank")
        count = len(outs)
        out_splits, in_splits = (c_int64 * count)(*outs), (c_int64 * count)(*ins)
    return _run(lib.c10d_alltoall_base, pg, (out, buf, out_splits, in_splits, count, None),
                async_op, (output, input, out, buf))


def barrier(group=None, async_op=False, device_ids=None):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "barrier")
    return _run(lib.c10d_barrier, pg, (None,), async_op, None)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that raises c10d.TimeoutError naming the ranks missing at the deadline (None:
    the group's timeout)."""
    pg = _group(group)
    if pg is None:
        return _skipped(group, "monitored_barrier")
    _capi.check(lib.c10d_monitored_barrier(pg._handle, _milliseconds(timeout),
                                           int(bool(wait_all_ranks))))
    return None


# ---- point-to-point ----

def _tag_options(tag):
    return None if tag == 0 else _capi.op_options(tag=tag)


def isend(tensor, dst, group=None, tag=0):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "isend")
    buf = _buffer(tensor, "tensor", False)
    return _run(lib.c10d_send, pg, (buf, pg.group_rank(dst, "dst"), _tag_options(tag)), True,
                (tensor, buf))


def send(tensor, dst, group=None, tag=0):
    pg = _group(group)
    if pg is None:
        return _skipped(group, "send")
    buf = _buffer(tensor, "tensor", False)
    _run(lib.c10d_send, pg, (buf, pg.group_rank(dst, "dst"), _tag_options(tag)), False, None)


def irecv(tensor, src=None, group=None, tag=0):
    """Starts a receive from src (global rank; None: whichever rank sends with tag first, which
    Work.source_rank() then tells)."""
    pg = _group(group)
    if pg is None:
        return _skipped(group, "irecv")
    buf = _buffer(tensor, "tensor", True)
    if src is None:
        return _run(lib.c10d_recv_anysource, pg, (buf, _tag_options(tag)), True, (tensor, buf))
    return _run(lib.c10d_recv, pg, (buf, pg.group_rank(src, "src"), _tag_options(tag)), True,
                (tensor, buf))


def recv(tensor, src=None, group=None, tag=0):
    """Receives into tensor from src (global rank; None: any) and returns the sender's rank."""
    pg = _group(group)
    if pg is None:
        _skipped(group, "recv")
        return -1
    if src is None:
        work = irecv(tensor, None, group, tag)
        work.wait()
        return work.source_rank()
    buf = _buffer(tensor, "tensor", True)
    _run(lib.c10d_recv, pg, (buf, pg.group_rank(src, "src"), _tag_options(tag)), False, None)
    return src


class P2POp:
    """One send (op=isend) or receive (op=irecv) for batch_isend_irecv."""

    __slots__ = ("op", "tensor", "peer", "group", "tag")

    def __init__(self, op, tensor, peer, group=None, tag=0):
        if op is not isend and op is not irecv:
            raise InvalidArgument(f"P2POp: op is {op!r}; it must be c10d.isend or c10d.irecv")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag


def batch_isend_irecv(p2p_op_list):
    """Starts every P2POp as one batch and returns their Works, in order."""
    if not p2p_op_list:
        raise InvalidArgument("batch_isend_irecv: the list of P2POps is empty")
    first = p2p_op_list[0].group
    if any(p.group is not first for p in p2p_op_list):
        raise InvalidArgument("batch_isend_irecv: every P2POp must use the same group")
    pg = _group(first)
    if pg is None:
        _skipped(first, "batch_isend_irecv")
        return []
    ops = (_capi.P2POp * len(p2p_op_list))()
    bufs = []
    for i, p in enumerate(p2p_op_list):
        receive = p.op is irecv
        buf = _buffer(p.tensor, f"p2p_op_list[{i}].tensor", receive)
        bufs.append(buf)
        ops[i].kind = _capi.P2P_RECV if receive else _capi.P2P_SEND
        ops[i].buffer = buf
        ops[i].peer = pg.group_rank(p.peer, f"p2p_op_list[{i}].peer")
        ops[i].tag = p.tag
    works = (c_void_p * len(ops))()
    _capi.check(lib.c10d_batch_isend_irecv(pg._handle, ops, len(ops), -1, works))
    return [Work(w, pg, (p.tensor, b)) for w, p, b in zip(works, p2p_op_list, bufs)]
