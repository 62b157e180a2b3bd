"""Training through the loss of ranks, without restarting the survivors (docs/elastic.md).

Under ``c10drun --elastic`` (or ``--max-restarts N``, whose launcher starts a dead rank again)::

    import c10d.elastic
    group = c10d.elastic.ElasticGroup()
    state = {"w": w}                      # what the ranks replicate: tensors, arrays, values
    group.join(state)                     # a restarted process: admitted, then healed
    while group.step < steps:
        ok = True
        try:
            train_step(group.process_group)
        except c10d.Error:
            ok = False                    # a lost rank: every survivor fails this step
        if group.commit(ok):
            apply_update()
            if not group.joins_pending:
                continue                  # else a restarted process asks to join: grow now
        group.reform(state)               # shrink or grow, heal, then redo the step

``process_group`` is the current generation's group (a ``c10d.ProcessGroup``); after a reform
the old one fails every operation with ``c10d.StateError``: take it again. ``reform`` and
``join`` heal the tensors of ``state`` in place from a member at the highest committed step, and
set its plain values (ints, floats, strings, bytes; others with allow_pickle) there too.

Errors: ``c10d.StateError`` when this rank was left out of a generation or fewer than
``min_size`` members remain (naming the lost ids); the group's and the store's errors pass
through.
"""

from ctypes import byref, c_int, c_size_t

from . import _capi
from .checkpoint import _State
from .distributed import ProcessGroup

lib = _capi.lib

__all__ = ["ElasticGroup", "Reformation"]


class Reformation:
    """What a reform or join changed: members (ids by rank), lost (ids no longer members),
    joined (ids of admitted restarts), the committed step every member is at, whether this rank
    was healed, and the seconds it took here."""

    def __init__(self, raw, before, members, joined=None):
        self.generation = raw.generation
        self.step = raw.step
        self.healed = bool(raw.healed)
        self.members = members
        self.lost = sorted(set(before) - set(members))
        # An id that died and came back within one reform is in neither list: the counts are
        # the library's.
        self.joined = joined if joined is not None else sorted(set(members) - set(before))
        self.lost_count = raw.num_lost
        self.joined_count = raw.num_joined
        self.seconds = raw.seconds

    def __repr__(self):
        return (f"<Reformation generation {self.generation}: members {self.members}, lost "
                f"{self.lost}, joined {self.joined}, step {self.step}"
                f"{', healed' if self.healed else ''}, {self.seconds:.3f} s>")


class ElasticGroup:
    """c10d::elastic::ElasticGroup from the environment (rank, size and store as
    init_process_group finds them)."""

    def __init__(self, backend=None, *, timeout=None, group_name=None, min_size=1,
                 join_timeout=None, allow_pickle=False):
        options = _capi.ElasticOptions(
            struct_size=_capi.ctypes.sizeof(_capi.ElasticOptions),
            backend=backend.encode() if backend else None,
            timeout_ms=int(timeout.total_seconds() * 1000) if timeout else 0,
            group_name=group_name.encode() if group_name else None,
            min_size=min_size,
            join_timeout_ms=int(join_timeout.total_seconds() * 1000) if join_timeout else 0)
        self._handle = _capi.created(lib.c10d_elastic_from_env, byref(options))
        self._group = None
        self._group_generation = None
        self._allow_pickle = allow_pickle

    def __del__(self, _free=lib.c10d_elastic_free):
        handle, self._handle = self._handle, None
        if handle:
            _free(handle)

    @property
    def process_group(self):
        """This generation's group."""
        generation = lib.c10d_elastic_generation(self._handle)
        if self._group is None or self._group_generation != generation:
            self._group = ProcessGroup(_capi.created(lib.c10d_elastic_group, self._handle))
            self._group_generation = generation
        return self._group

    def rank(self):
        return self.process_group.rank()

    def size(self):
        return self.process_group.size()

    @property
    def id(self):
        return lib.c10d_elastic_id(self._handle)

    @property
    def step(self):
        return lib.c10d_elastic_step(self._handle)

    @property
    def generation(self):
        return lib.c10d_elastic_generation(self._handle)

    @property
    def incarnation(self):
        return lib.c10d_elastic_incarnation(self._handle)

    @property
    def joins_pending(self):
        return bool(lib.c10d_elastic_joins_pending(self._handle))

    def members(self):
        count = c_size_t()
        _capi.check(lib.c10d_elastic_members(self._handle, None, 0, byref(count)))
        ids = (c_int * max(1, count.value))()
        _capi.check(lib.c10d_elastic_members(self._handle, ids, count.value, byref(count)))
        return list(ids[:count.value])

    def commit(self, ok=True):
        committed = c_int()
        _capi.check(lib.c10d_elastic_commit(self._handle, 1 if ok else 0, byref(committed)))
        return bool(committed.value)

    def reform(self, state=None):
        return self._change(lib.c10d_elastic_reform, state, self.members())

    def join(self, state=None):
        joining = self.incarnation > 0
        return self._change(lib.c10d_elastic_join, state, [] if joining else self.members(),
                            [self.id] if joining else [])

    def _change(self, call, state, before, joined=None):
        raw = _capi.Reformation(struct_size=_capi.ctypes.sizeof(_capi.Reformation))
        held = _State(state, writable=True) if state is not None else None
        try:
            self._group = None  # the old generation's handle goes with the old group
            _capi.check(call(self._handle, held.handle if held else None, byref(raw)))
            if held is not None and raw.healed:
                held.read_values(self._allow_pickle)
        finally:
            if held is not None:
                held.close()
        return Reformation(raw, before, self.members(), joined)
