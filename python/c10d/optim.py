"""torch.distributed.optim.DistributedOptimizer over c10d.rpc and c10d.dist_autograd.

    optimizer = DistributedOptimizer(torch.optim.SGD, param_rrefs, lr=0.05)
    with dist_autograd.context() as context_id:
        ...
        dist_autograd.backward(context_id, [loss])
        optimizer.step(context_id)

Each owner of some of the parameters keeps one optimizer_class instance over them; step(id)
sets each parameter's .grad to its gradient in context id on its owner (None when it has none),
steps every owner's optimizer at once, and clears .grad again. Steps of one owner's optimizer run
one at a time. Errors: the first owner's, raised after every owner finished.
"""

import itertools
import threading

from . import dist_autograd, rpc
from .errors import InvalidArgument, StateError

_ids = itertools.count(1)
_optimizers = {}  # (creator, number) -> (optimizer, parameters, lock), on each owner


class DistributedOptimizer:
    def __init__(self, optimizer_class, params_rref, *args, **kwargs):
        by_owner = {}
        for rref in params_rref:
            if not isinstance(rref, rpc.RRef):
                raise InvalidArgument(f"DistributedOptimizer: {rref!r} is not an RRef (wrap a "
                                      "parameter this worker owns as rpc.RRef(parameter))")
            by_owner.setdefault(rref.owner_name(), []).append(rref._key())
        if not by_owner:
            raise InvalidArgument("DistributedOptimizer: no parameters")
        self._id = (rpc.get_worker_info().name, next(_ids))
        self._owners = sorted(by_owner)
        _wait_all([rpc.rpc_async(owner, _create, (self._id, optimizer_class, keys, args, kwargs))
                   for owner, keys in by_owner.items()])

    def step(self, context_id):
        """Steps every owner's optimizer with the gradients of context_id there."""
        _wait_all([rpc.rpc_async(owner, _step, (self._id, context_id)) for owner in self._owners])


def _wait_all(futures):
    first = None
    for future in futures:
        try:
            future.wait()
        except BaseException as e:
            first = first or e
    if first is not None:
        raise first


def _create(optimizer_id, optimizer_class, keys, args, kwargs):
    params = []
    for key in keys:
        try:
            params.append(rpc._owned[key])
        except KeyError:
            raise StateError(f"DistributedOptimizer: worker '{rpc.get_worker_info().name}' no "
                             f"longer holds the parameter of RRef {key}") from None
    _optimizers[optimizer_id] = (optimizer_class(params, *args, **kwargs), params,
                                 threading.Lock())


def _step(optimizer_id, context_id):
    optimizer, params, lock = _optimizers[optimizer_id]
    grads = dist_autograd.get_gradients(context_id)
    with lock:
        for param in params:
            param.grad = grads.get(param)
        try:
            optimizer.step()
        finally:
            for param in params:
                param.grad = None
