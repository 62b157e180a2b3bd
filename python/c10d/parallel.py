"""Data parallelism: the C API's gradient reducer, and torch's DistributedDataParallel over it.

Reducer is framework-free: register parameters and their gradient tensors once, then in each
backward mark each gradient ready as it is final (any thread), and finalize_backward() leaves
the average over the ranks in every gradient. The gradients travel in buckets, each reduced as
soon as its gradients are ready, while the backward goes on.

DistributedDataParallel wraps a CPU torch.nn.Module as torch's does: rank 0's parameters (and
buffers) everywhere at construction, and a loss.backward() that returns with averaged gradients
in each parameter's .grad.
"""

import contextlib
import ctypes
import sys
import weakref
from ctypes import byref, c_int

from . import _capi
from . import distributed as _dist
from ._capi import lib
from ._tensors import buffer as _buffer, buffers as _buffers
from .errors import InvalidArgument

_HOOKS = {"allreduce": 0, "fp16": 1, "bf16": 2}



def _is_torch(t):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(t, torch.Tensor)


def _zeros_like(t, name):
    if _is_torch(t):
        return sys.modules["torch"].zeros_like(t)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(t, numpy.ndarray):
        return numpy.zeros_like(t)
    raise InvalidArgument(f"Reducer: {name} is neither a torch tensor nor a numpy array, so the "
                          "reducer cannot allocate its gradient; pass grads")


class Reducer:
    """Averages the gradients of parameters over the ranks of group (None: the default group).

    grads: one tensor per parameter (same dtype and size) that the framework accumulates into
    and the reducer overwrites with the average; None allocates zeros (numpy and torch
    parameters). With gradient_as_bucket_view the reducer owns the gradients instead:
    gradient(i) is a view into its buckets. hook: how buckets travel ("allreduce" in their own
    dtype, or "fp16"/"bf16" compressed). names (optional) name the parameters in errors.
    Every rank registers the same parameters in the same order. The reducer keeps parameters
    and gradients alive.
    """

    def __init__(self, parameters, grads=None, group=None, first_bucket_bytes=1 << 20,
                 bucket_cap_bytes=25 << 20, find_unused_parameters=False,
                 gradient_as_bucket_view=False, hook="allreduce", names=None):
        self._handle = None
        pg = _dist._group(group)
        if pg is None:
            raise InvalidArgument("Reducer: this rank is not a member of group")
        if hook not in _HOOKS:
            raise InvalidArgument(f"Reducer: hook is {hook!r}; one of {', '.join(_HOOKS)}")
        params = list(parameters)
        names = None if names is None else [str(n) for n in names]
        if names is not None and len(names) != len(params):
            raise InvalidArgument(f"Reducer: {len(names)} names for {len(params)} parameters")
        if gradient_as_bucket_view:
            if grads is not None:
                raise InvalidArgument("Reducer: with gradient_as_bucket_view the reducer owns "
                                      "the gradients; do not pass grads")
        elif grads is None:
            grads = [_zeros_like(p, f"parameters[{i}]") for i, p in enumerate(params)]
        else:
            grads = list(grads)
            if len(grads) != len(params):
                raise InvalidArgument(f"Reducer: {len(grads)} grads for {len(params)} parameters")

        entries = (_capi.DdpParameter * len(params))()
        descriptors = []
        for i, p in enumerate(params):
            entries[i].value = value = _buffer(p, f"parameters[{i}]", True)
            descriptors.append(value)
            if grads is not None:
                entries[i].grad = grad = _buffer(grads[i], f"grads[{i}]", True)
                descriptors.append(grad)
            if names is not None:
                entries[i].name = names[i].encode()
        options = _capi.ddp_options(
            first_bucket_bytes=first_bucket_bytes, bucket_cap_bytes=bucket_cap_bytes,
            find_unused_parameters=int(bool(find_unused_parameters)),
            gradient_as_bucket_view=int(bool(gradient_as_bucket_view)), hook=_HOOKS[hook])
        self._handle = _capi.created(lib.c10d_ddp_create, pg.handle, entries, len(params), options)
        self._group = pg
        self._parameters = params
        self._grads = grads
        self._descriptors = descriptors  # what keeps DLPack and buffer-protocol memory exported

    def __del__(self, _free=lib.c10d_ddp_free):
        handle, self._handle = self._handle, None
        if handle:
            _free(handle)

    def __len__(self):
        return len(self._parameters)

    def sync_parameters(self, buffers=(), root=0):
        """Collective: checks that every rank registered the same parameters, then broadcasts
        them and buffers from global rank root."""
        buffers = list(buffers)
        array = _buffers(buffers, "buffers", True) if buffers else None
        _capi.check(lib.c10d_ddp_sync_parameters(self._handle, array, len(buffers),
                                                 self._group.group_rank(root, "root")))

    def prepare_for_backward(self, active_ranks=-1):
        """Optional, before a backward: how many ranks run it (uneven inputs); -1: all."""
        _capi.check(lib.c10d_ddp_prepare_for_backward(self._handle, active_ranks))

    def mark_grad_ready(self, i):
        """Gradient i is final for this backward (any thread; may start its bucket's
        reduction)."""
        _capi.check(lib.c10d_ddp_mark_grad_ready(self._handle, i))

    def finalize_backward(self):
        """Waits for every bucket; the gradients then hold the averages. False for a backward
        under no_sync (nothing was reduced)."""
        synced = c_int()
        _capi.check(lib.c10d_ddp_finalize_backward(self._handle, byref(synced)))
        return bool(synced.value)

    def shadow_backward(self):
        """On a rank out of data: one backward's collectives with zeros."""
        _capi.check(lib.c10d_ddp_shadow_backward(self._handle))

    @contextlib.contextmanager
    def no_sync(self):
        """Backwards inside accumulate locally; the first one after it reduces the sums."""
        _capi.check(lib.c10d_ddp_set_no_sync(self._handle, 1))
        try:
            yield
        finally:
            _capi.check(lib.c10d_ddp_set_no_sync(self._handle, 0))

    def gradient(self, i):
        """Where gradient i lives. With gradient_as_bucket_view: a view into the reducer's
        memory (a torch tensor for torch parameters, else a numpy array) shaped like parameter
        i; the first finalize_backward may move it, so fetch it again after each one. The view
        keeps the reducer alive."""
        if self._grads is not None:
            return self._grads[i]
        desc = _capi.Buffer()
        _capi.check(lib.c10d_ddp_gradient(self._handle, i, byref(desc)))
        if desc.device_type != _capi.DEVICE_CPU:
            raise InvalidArgument("Reducer.gradient: views of device memory are not supported")
        nbytes = desc.count * lib.c10d_dtype_size(desc.dtype)
        raw = (ctypes.c_ubyte * nbytes).from_address(desc.data)
        raw._owner = self  # the memory is the reducer's: it must outlive every view
        param = self._parameters[i]
        if _is_torch(param):
            return sys.modules["torch"].frombuffer(raw, dtype=param.dtype).view(param.shape)
        import numpy
        dtype = lib.c10d_dtype_name(desc.dtype).decode()
        if dtype == "bfloat16":
            raise InvalidArgument("Reducer.gradient: numpy has no bfloat16")
        return numpy.frombuffer(raw, dtype=dtype).reshape(getattr(param, "shape", -1))


def _make_ddp_class():
    import torch

    class DistributedDataParallel(torch.nn.Module):
        """torch's DistributedDataParallel for CPU modules, over Reducer.

        Construction broadcasts rank 0's parameters and buffers. Each parameter that requires a
        gradient gets a .grad the reducer reduces in place (zeros; with gradient_as_bucket_view
        a view into the reducer's buckets), and a hook on its gradient accumulator that marks
        it ready once autograd has accumulated into it; the first hook of a backward queues the
        reducer's finalize at the end of the backward, so loss.backward() returns with averaged
        gradients. A .grad that was set to None (zero_grad(set_to_none=True)) or replaced is
        copied back into the registered memory first.
        """

        def __init__(self, module, group=None, find_unused_parameters=False, bucket_cap_mb=25,
                     gradient_as_bucket_view=False):
            super().__init__()
            self.module = module
            named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
            self._params = [p for _, p in named]
            self._views = bool(gradient_as_bucket_view)
            if not self._views:
                for p in self._params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
            self.reducer = Reducer(
                [p.detach() for p in self._params],
                None if self._views else [p.grad for p in self._params], group=group,
                bucket_cap_bytes=int(bucket_cap_mb * (1 << 20)),
                find_unused_parameters=find_unused_parameters,
                gradient_as_bucket_view=self._views, names=[n for n, _ in named])
            self.reducer.sync_parameters([b.detach() for b in module.buffers()])
            self._grads = [None] * len(self._params)
            self._bind_grads()
            self._queued = False
            # The accumulators must stay alive for their hooks to stay registered.
            self._accumulators = []
            self._hook_handles = []
            for i, p in enumerate(self._params):
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                self._accumulators.append(accumulator)
                self._hook_handles.append(accumulator.register_hook(self._hook_for(i)))

        def _bind_grads(self):
            """Points each .grad at the memory the reducer reduces."""
            for i, p in enumerate(self._params):
                grad = self.reducer.gradient(i)
                if self._views and self._grads[i] is None:
                    grad.zero_()
                self._grads[i] = grad
                if p.grad is not grad:
                    p.grad = grad

        def _hook_for(self, i):
            # Autograd holds the hooks: a strong reference would keep this module alive forever.
            this = weakref.ref(self)

            def hook(*_):
                ddp = this()
                if ddp is not None:
                    ddp._ready(i)
            return hook

        def _ready(self, i):
            if not self._queued:
                self._queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._finalize)
            p, grad = self._params[i], self._grads[i]
            if p.grad is not grad:
                grad.copy_(p.grad)
                p.grad = grad
            self.reducer.mark_grad_ready(i)

        def _finalize(self):
            self._queued = False
            self.reducer.finalize_backward()
            if self._views:
                self._bind_grads()  # the first finalize may move the buckets

        def forward(self, *args, **kwargs):
            # A backward that failed before its end never ran the queued finalize.
            self._queued = False
            return self.module(*args, **kwargs)

        @contextlib.contextmanager
        def no_sync(self):
            """Backwards inside accumulate into .grad locally; the first one after it averages
            the sums."""
            with self.reducer.no_sync():
                yield

    DistributedDataParallel.__qualname__ = "DistributedDataParallel"  # pickled by this name
    return DistributedDataParallel


def __getattr__(name):
    # torch is imported only by those who use DistributedDataParallel.
    if name == "DistributedDataParallel":
        cls = _make_ddp_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
