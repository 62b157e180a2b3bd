"""Checkpoints that load at any world size, as torch.distributed.checkpoint names them.

    import c10d.checkpoint as dcp
    state = {"model": {"w": Shard(my_rows, global_shape=(1024, 512), offsets=(256, 0))},
             "step": 10}
    dcp.save(state, checkpoint_id="ckpt/step-10")        # collective over the default group
    dcp.load(state, checkpoint_id=dcp.latest("ckpt"))    # in place, at any world size

A state dict is a dict, nested as deep as you like (keys joined with "." name the entries). Its
leaves are tensors this rank holds whole (torch.Tensor, numpy.ndarray, anything with __dlpack__
or the buffer protocol; replicated when several ranks hold one; one without a `shape`
attribute is saved flat), Shard objects (a local tensor that is a slice of a larger global
tensor), and values: int (as the C++ State's setInt stores it), float, str, bytes (stored as
they are), NumPy scalars (as the Python number), and anything else pickle takes. load writes
tensors in place and puts the checkpoint's values into the dict; a pickled value is unpickled
only with allow_pickle=True (unpickling runs code the checkpoint's author chose).

The format and its guarantees are the C++ library's (c10d/checkpoint/Checkpoint.hpp,
docs/checkpoint.md): one safetensors file per writing rank, metadata.json with a checksum per
block, the folder visible only once complete. Errors: c10d.CheckpointError for an incomplete,
damaged or mismatched checkpoint, naming the tensor, file and offset; c10d.InvalidArgument for a
state the ranks disagree about.
"""

import pickle
import sys
import time
import weakref
from ctypes import byref, c_int, c_int64

from . import _capi, _tensors, distributed
from ._capi import Bytes, lib

__all__ = ["Shard", "save", "load", "async_save", "latest", "keep_last", "verify",
           "consolidate"]

_INT = b"int64:"
_FLOAT = b"float64:"
_STR = b"str:"
_PICKLE = b"pickle:"


class Shard:
    """local is a slice of a global tensor of global_shape: a box starting at offsets (one per
    dimension; its sizes are local's shape), or, with flat_offset, the elements
    [flat_offset, flat_offset + local's element count) of the global tensor in row-major order
    (how ZeRO and FSDP cut flat parameters)."""

    __slots__ = ("local", "global_shape", "offsets", "flat_offset")

    def __init__(self, local, global_shape, offsets=None, *, flat_offset=None):
        if (offsets is None) == (flat_offset is None):
            raise _capi.errors.InvalidArgument(
                "Shard: give offsets (a box) or flat_offset (a flat range), not both or neither")
        if offsets is not None and len(offsets) != len(global_shape):
            raise _capi.errors.InvalidArgument(
                f"Shard: {len(offsets)} offsets for a global shape of {len(global_shape)} "
                f"dimensions {tuple(global_shape)}")
        self.local = local
        self.global_shape = tuple(int(s) for s in global_shape)
        self.offsets = None if offsets is None else tuple(int(o) for o in offsets)
        self.flat_offset = None if flat_offset is None else int(flat_offset)


def _flatten(tree, prefix, out):
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            _flatten(value, name + ".", out)
        else:
            out.append((name, tree, key, value))


def _shape_of(obj, buf):
    shape = getattr(obj, "shape", None)
    return (buf.count,) if shape is None else tuple(int(s) for s in shape)


def _is_numpy_scalar(value):
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


def _is_tensor(value):
    if isinstance(value, (bytes, str, int, float, bool, type(None), list, tuple)):
        return False
    if _is_numpy_scalar(value):
        return False
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return True
    return hasattr(value, "__dlpack__") or hasattr(value, "__array_interface__") or \
        isinstance(value, (bytearray, memoryview))


def _encode(value):
    if _is_numpy_scalar(value):
        value = value.item()
    if isinstance(value, bool):
        return _PICKLE + pickle.dumps(value)
    if isinstance(value, int):
        return _INT + str(value).encode()
    if isinstance(value, float):
        return _FLOAT + repr(value).encode()
    if isinstance(value, str):
        return _STR + value.encode()
    if isinstance(value, bytes):
        return value
    return _PICKLE + pickle.dumps(value)


def _decode(name, data, allow_pickle):
    if data.startswith(_INT):
        return int(data[len(_INT):])
    if data.startswith(_FLOAT):
        return float(data[len(_FLOAT):])
    if data.startswith(_STR):
        return data[len(_STR):].decode()
    if data.startswith(_PICKLE):
        if not allow_pickle:
            raise _capi.errors.CheckpointError(
                f"checkpoint: value '{name}' is a pickle; load it with allow_pickle=True if you "
                "trust the checkpoint (unpickling runs code its author chose)")
        return pickle.loads(data[len(_PICKLE):])
    return data


class _State:
    """A c10d_checkpoint_state over a state dict's leaves (tensors by reference)."""

    def __init__(self, state_dict, writable):
        self.handle = _capi.created(lib.c10d_checkpoint_state_new)
        self.writable = writable
        self.keep = []
        self.leaves = []
        flat = []
        try:
            if not isinstance(state_dict, dict):
                raise _capi.errors.InvalidArgument(
                    f"checkpoint: the state dict is a {type(state_dict).__name__}, not a dict")
            _flatten(state_dict, "", flat)
            for name, parent, key, value in flat:
                self.leaves.append((name, parent, key, value))
                if isinstance(value, Shard):
                    self._add(name, value.local, value)
                elif _is_tensor(value):
                    self._add(name, value, None)
                else:
                    data = _encode(value)
                    _capi.check(lib.c10d_checkpoint_state_set_value(
                        self.handle, name.encode(), data, len(data)))
        except BaseException:
            self.close()
            raise

    def _add(self, name, local, shard):
        buf = _tensors.buffer(local, name, self.writable)
        self.keep.append(buf)
        global_shape = _shape_of(local, buf) if shard is None else shard.global_shape
        shape = (c_int64 * max(1, len(global_shape)))(*global_shape)
        kind, offsets, sizes = 0, None, None
        if shard is not None and shard.flat_offset is not None:
            kind = 1
            offsets = (c_int64 * 1)(shard.flat_offset)
            sizes = (c_int64 * 1)(buf.count)
        elif shard is not None:
            local_shape = _shape_of(local, buf)
            if len(local_shape) != len(global_shape):
                raise _capi.errors.InvalidArgument(
                    f"checkpoint: Shard '{name}' is {len(local_shape)}-dimensional but its "
                    f"global shape {global_shape} has {len(global_shape)} dimensions")
            offsets = (c_int64 * max(1, len(global_shape)))(*shard.offsets)
            sizes = (c_int64 * max(1, len(global_shape)))(*local_shape)
        _capi.check(lib.c10d_checkpoint_state_add(self.handle, name.encode(), byref(buf), shape,
                                                  len(global_shape), kind, offsets, sizes))

    def read_values(self, allow_pickle):
        """Puts the loaded values back into the state dict."""
        for name, parent, key, value in self.leaves:
            if isinstance(value, Shard) or _is_tensor(value):
                continue
            out, found = Bytes(), c_int()
            _capi.check(lib.c10d_checkpoint_state_get_value(self.handle, name.encode(),
                                                            byref(out), byref(found)))
            try:
                if found.value:
                    parent[key] = _decode(name, _capi.ctypes.string_at(out.data, out.size),
                                          allow_pickle)
            finally:
                lib.c10d_free(out.data)

    def close(self):
        if self.handle:
            lib.c10d_checkpoint_state_free(self.handle)
            self.handle = None


def _group(process_group):
    """The ProcessGroup to run on, or None for this process alone (no group initialized)."""
    if process_group is None and not distributed.is_initialized():
        return None
    pg = distributed._group(process_group)
    if pg is None:
        raise _capi.errors.InvalidArgument(
            "checkpoint: this rank is not a member of process_group; only its members save and "
            "load through it")
    return pg


def _group_handle(process_group):
    pg = _group(process_group)
    return None if pg is None else pg.handle


def _save_options(overwrite, layout):
    options = _capi.CheckpointSaveOptions(_capi.ctypes.sizeof(_capi.CheckpointSaveOptions),
                                          int(bool(overwrite)), 0,
                                          layout.encode() if layout else None)
    return options


def save(state_dict, checkpoint_id, process_group=None, *, overwrite=False, layout=None):
    """Writes state_dict from every rank of process_group (the default group when one is
    initialized, else this process alone) into the folder checkpoint_id; returns once the
    checkpoint is complete."""
    state = _State(state_dict, False)
    try:
        _capi.check(lib.c10d_checkpoint_save(state.handle, str(checkpoint_id).encode(),
                                             _group_handle(process_group),
                                             byref(_save_options(overwrite, layout))))
    finally:
        state.close()


def load(state_dict, checkpoint_id, process_group=None, *, strict=True, allow_pickle=False,
         check_first=True):
    """Fills state_dict in place from the folder checkpoint_id, at any world size and slicing.
    strict=False lets the checkpoint hold entries nobody asks for and lets state_dict ask for
    entries the checkpoint lacks (those are left as they are). allow_pickle=True unpickles
    values saved as pickles (anything but int, float, str and bytes). check_first=False reads
    once, checking each block as it is copied: faster, but a damaged checkpoint leaves the
    tensors partly written (the error is raised all the same)."""
    state = _State(state_dict, True)
    try:
        options = _capi.CheckpointLoadOptions(_capi.ctypes.sizeof(_capi.CheckpointLoadOptions),
                                              int(not strict), int(not strict),
                                              int(bool(check_first)))
        _capi.check(lib.c10d_checkpoint_load(state.handle, str(checkpoint_id).encode(),
                                             _group_handle(process_group), byref(options)))
        state.read_values(allow_pickle)
    finally:
        state.close()


class _Saver:
    """One background saver per process group (its creation is collective)."""

    def __init__(self, handle):
        self.handle = _capi.created(lib.c10d_checkpoint_saver_new, handle, 0)
        self.saves = 0  # async_save calls made on it

    def __del__(self, _free=lib.c10d_checkpoint_saver_free):
        if getattr(self, "handle", None):
            _free(self.handle)
            self.handle = None


# Per ProcessGroup object (not its handle, which a later group may reuse); gone with the group.
_savers = weakref.WeakKeyDictionary()


class SaveFuture:
    """What async_save returns. result() (or wait()) blocks until the checkpoint is committed and
    raises the save's error; with a timeout in seconds, c10d.TimeoutError when it is not done by
    then. done() says whether it has finished. Once a later async_save has started, this save is
    over: its error, if any, was raised by that call, and result() returns at once."""

    def __init__(self, saver):
        self._saver = saver
        self._number = saver.saves

    def done(self):
        if self._number != self._saver.saves:
            return True
        done = c_int()
        _capi.check(lib.c10d_checkpoint_saver_done(self._saver.handle, byref(done)))
        return bool(done.value)

    def result(self, timeout=None):
        if self._number != self._saver.saves:
            return None
        if timeout is not None:
            deadline = time.monotonic() + timeout
            while not self.done():
                if time.monotonic() >= deadline:
                    raise _capi.errors.TimeoutError(
                        f"checkpoint: the asynchronous save is still running after {timeout} s")
                time.sleep(0.005)
        _capi.check(lib.c10d_checkpoint_saver_wait(self._saver.handle))
        return None

    wait = result


def async_save(state_dict, checkpoint_id, process_group=None, *, overwrite=False, layout=None):
    """Copies this rank's tensors into host memory (reused between saves) and returns; a thread
    writes and commits the checkpoint. A second async_save waits for the first; the first's
    failure is raised by the next async_save or result(). Needs a process group."""
    pg = _group(process_group)
    if pg is None:
        raise _capi.errors.StateError("async_save needs a process group: call "
                                      "c10d.init_process_group() first")
    saver = _savers.get(pg)
    if saver is None:
        saver = _savers[pg] = _Saver(pg.handle)
    state = _State(state_dict, False)
    try:
        _capi.check(lib.c10d_checkpoint_saver_save(saver.handle, state.handle,
                                                   str(checkpoint_id).encode(),
                                                   byref(_save_options(overwrite, layout))))
    finally:
        state.close()
    saver.saves += 1
    return SaveFuture(saver)


def latest(root):
    """The newest complete checkpoint folder under root, or None."""
    out, found = Bytes(), c_int()
    _capi.check(lib.c10d_checkpoint_latest(str(root).encode(), byref(out), byref(found)))
    try:
        return _capi.ctypes.string_at(out.data, out.size).decode() if found.value else None
    finally:
        lib.c10d_free(out.data)


def keep_last(root, keep):
    """Removes all but the newest `keep` complete checkpoints under root, and partial ones."""
    _capi.check(lib.c10d_checkpoint_keep_last(str(root).encode(), keep))


def verify(checkpoint_id):
    """Every checksum checked: the list of problems, empty when the checkpoint is sound."""
    out, problems = Bytes(), c_int()
    _capi.check(lib.c10d_checkpoint_verify(str(checkpoint_id).encode(), byref(out),
                                           byref(problems)))
    try:
        text = _capi.ctypes.string_at(out.data, out.size).decode()
    finally:
        lib.c10d_free(out.data)
    return [line for line in text.split("\n") if line]


def consolidate(checkpoint_id, out):
    """Writes every tensor whole into the safetensors file out."""
    _capi.check(lib.c10d_checkpoint_consolidate(str(checkpoint_id).encode(), str(out).encode()))
