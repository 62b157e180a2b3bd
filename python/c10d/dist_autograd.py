"""torch.distributed.autograd over c10d.rpc and torch's own autograd (PyTorch's FAST mode).

    import c10d.dist_autograd as dist_autograd

    with dist_autograd.context() as context_id:
        loss = model(inputs)                     # rpc calls inside carry the context
        dist_autograd.backward(context_id, [loss])
        optimizer.step(context_id)               # c10d.optim.DistributedOptimizer

Calls made while a context is current (rpc_sync, rpc_async, remote, and the calls a function
called in it makes) record the tensors they carry that require gradients: the caller's as sent,
the callee's copies (leaves that require gradients) as received, and the result's the other way.
backward(context_id, roots) runs torch.autograd from the roots; the gradients that reach this
worker's received tensors go back to their senders, which run torch.autograd from the tensors
they sent, and so on, each message computing its share on its own (FAST mode). Gradients of the
other leaves (the parameters) are summed per context, not in their .grad: get_gradients(id).

Errors: backward outside a context it knows raises c10d.InvalidArgument; a worker that fails or
is lost on the way fails backward with its c10d.RemoteError, after the others reached finish.
"""

import contextlib
import itertools
import sys
import threading

from . import rpc as _rpc
from .errors import InvalidArgument

_local = threading.local()  # .context: the context id current on this thread
_lock = threading.Lock()
_contexts = {}  # id -> _Context
_ids = itertools.count(1)


class _Context:
    def __init__(self):
        self.sent = {}  # message -> (worker name, [tensors this worker sent])
        self.received = {}  # message -> (worker name, [leaves this worker received])
        self.gradients = {}  # parameter -> its summed gradient
        self.touched = set()  # workers to release the context on


def _context(context_id, create=False):
    with _lock:
        found = _contexts.get(context_id)
        if found is None and create:
            found = _contexts[context_id] = _Context()
    if found is None:
        raise InvalidArgument(f"dist_autograd: no context {context_id} on this worker (it was "
                              "released, or never made or called in here)")
    return found


def _current():
    return getattr(_local, "context", None)


@contextlib.contextmanager
def _as_current(context_id):
    outer = _current()
    _local.context = context_id
    try:
        yield
    finally:
        _local.context = outer


@contextlib.contextmanager
def context():
    """A new context, current on this thread inside the block; its id is what the block gets.
    Leaving the block releases it here and on every worker it reached."""
    me = _rpc._self
    if me is None:
        raise InvalidArgument("dist_autograd.context: call init_rpc first")
    context_id = (me.id << 48) | next(_ids)
    _context(context_id, create=True)
    try:
        with _as_current(context_id):
            yield context_id
    finally:
        _release(context_id, None)


def get_gradients(context_id):
    """{parameter: its gradient summed over the backward passes of context_id} on this worker."""
    return dict(_context(context_id).gradients)


def backward(context_id, roots, retain_graph=False):
    """Runs the distributed backward pass of context_id from roots (scalar tensors on this
    worker); returns once every worker it reached has finished."""
    import torch
    if not roots or any(not isinstance(r, torch.Tensor) or r.numel() != 1 for r in roots):
        raise InvalidArgument("dist_autograd.backward: roots must be a non-empty list of scalar "
                              "tensors")
    _context(context_id)
    seeds = [(root, torch.ones_like(root)) for root in roots]
    _backward_from(context_id, seeds).wait()


# ---- what travels ----

def _tensors_requiring_grad(value, found):
    """Appends the tensors in value (lists, tuples, dicts nested) that require gradients."""
    import torch
    if isinstance(value, torch.Tensor):
        if value.requires_grad:
            found.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors_requiring_grad(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _tensors_requiring_grad(item, found)
    return found


def _detached(value):
    """value with each tensor that requires gradients replaced by a leaf copy that does (what
    pickling takes: torch refuses a non-leaf one)."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().requires_grad_() if value.requires_grad else value
    if isinstance(value, list):
        return [_detached(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_detached(item) for item in value)
    if isinstance(value, dict):
        return {key: _detached(item) for key, item in value.items()}
    return value


def _outgoing(to, args, kwargs):
    """For a call to worker `to` made in the current context: (context header, args, kwargs)
    with the tensors recorded as sent; (None, args, kwargs) outside a context."""
    context_id = _current()
    if context_id is None or "torch" not in sys.modules:
        return None, args, kwargs
    sent = _tensors_requiring_grad([args, kwargs], [])
    message = (_rpc._self.id << 48) | next(_ids)
    state = _context(context_id, create=True)
    with _lock:
        state.sent[message] = (to, sent)
        state.touched.add(to)
    return (context_id, message, _rpc._self.name), _detached(args), _detached(kwargs)


def _received(header, value, sender):
    """On either end of a call in a context: records the value's tensors that require gradients
    as received in message from sender."""
    context_id, message = header[0], header[1]
    state = _context(context_id, create=True)
    leaves = _tensors_requiring_grad(value, [])
    with _lock:
        state.received[message] = (sender, leaves)
        state.touched.add(sender)


def _reply(header, result):
    """On the callee: records the result's tensors as sent back; the result as it travels."""
    context_id, message, caller = header
    state = _context(context_id, create=True)
    with _lock:
        state.sent[message] = (caller, _tensors_requiring_grad(result, []))
    return _detached(result)


# ---- backward ----

def _leaves(roots, received):
    """The leaf tensors requiring gradients that roots' graph reaches, received ones aside."""
    skip = {id(t) for t in received}
    found, seen, stack = [], set(), [r.grad_fn for r in roots if r.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) not in skip:
            found.append(variable)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return found


def _backward_from(context_id, seeds):
    """This worker's share: torch.autograd from seeds ((tensor, gradient) pairs), parameter
    gradients summed into the context, the received tensors' gradients sent to their senders.
    A Future that completes when those have finished."""
    import torch
    state = _context(context_id)
    with _lock:
        edges = list(state.received.items())
    received = [leaf for _, (_, leaves) in edges for leaf in leaves]
    roots = [tensor for tensor, _ in seeds if tensor.requires_grad]
    grads_in = [grad for tensor, grad in seeds if tensor.requires_grad]
    params = _leaves(roots, received)
    # A seed that is a leaf itself (a parameter sent as it is) is a parameter too; autograd
    # gives an output that is also an input its own gradient.
    received_ids = {id(t) for t in received}
    known = {id(p) for p in params}
    params += [t for t in roots if t.grad_fn is None and id(t) not in received_ids
               and id(t) not in known]
    inputs = params + received
    grads = torch.autograd.grad(roots, inputs, grads_in, retain_graph=True,
                                allow_unused=True) if roots and inputs else []
    with _lock:
        for param, grad in zip(params, grads):
            if grad is not None:
                known = state.gradients.get(param)
                state.gradients[param] = grad if known is None else known + grad
    sends = []
    offset = len(params)
    for message, (sender, leaves) in edges:
        back = []
        for leaf in leaves:
            back.append(grads[offset] if offset < len(grads) else None)
            offset += 1
        if all(g is None for g in back):
            continue
        back = [torch.zeros_like(leaf) if g is None else g for leaf, g in zip(leaves, back)]
        with _as_current(None):  # gradients travel outside the context: nothing to record
            sends.append(_rpc.rpc_async(sender, _backward_message, (context_id, message, back)))
    return _all(sends)


def _all(futures):
    """A Future of None once every one of futures completed; the first error if any failed."""
    done = _rpc.Future(what="a distributed backward")
    if not futures:
        done.set_result(None)
        return done
    left = [len(futures)]
    errors = []
    lock = threading.Lock()

    def one(future):
        try:
            future.wait()
        except BaseException as e:
            errors.append(e)
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            if errors:
                done.set_exception(errors[0])
            else:
                done.set_result(None)

    for future in futures:
        future.add_done_callback(one)
    return done


@_rpc.functions.async_execution
def _backward_message(context_id, message, grads):
    """On the sender of message: its sent tensors' gradients arrived; its share of the pass."""
    state = _context(context_id)
    with _lock:
        if message not in state.sent:
            raise InvalidArgument(f"dist_autograd: context {context_id} sent nothing in message "
                                  f"{message} from worker '{_rpc._self.name}'")
        _, sent = state.sent[message]
    if len(sent) != len(grads):
        raise InvalidArgument(f"dist_autograd: {len(grads)} gradients for the {len(sent)} tensors "
                              f"of message {message}")
    return _backward_from(context_id, list(zip(sent, grads)))


def _release(context_id, sender):
    """Forgets the context here and passes the release on to the workers it reached (nobody waits
    for those; a released context reaches nothing, so a cycle ends)."""
    with _lock:
        state = _contexts.pop(context_id, None)
    if state is None or not _rpc._running:
        return
    for worker in state.touched - {sender, _rpc._self.name}:
        try:
            with _as_current(None):
                _rpc.rpc_async(worker, _release_message, (context_id, _rpc._self.name))
        except Exception:
            pass  # the worker or this one is shutting down: nothing is left to free


def _release_message(context_id, sender):
    _release(context_id, sender)


def _live_contexts():
    with _lock:
        return len(_contexts)
