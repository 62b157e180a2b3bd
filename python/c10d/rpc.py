"""torch.distributed.rpc's calls by name and by reference, over the C API's RPC agent.

    import c10d.rpc as rpc

    @rpc.register("add")
    def add(a, b):
        return a + b

    rpc.init_rpc(f"worker{rank}")          # RANK, WORLD_SIZE, and a store (below)
    rpc.rpc_sync("worker1", "add", (1, 2))  # 3
    rpc.rpc_async("worker1", add, (1, 2)).wait()
    ref = rpc.remote("worker1", add, (1, 2)); ref.to_here()
    rpc.shutdown()

A function is a name given to register() (on the callee, before or after init_rpc), or a
module-level callable, which travels by reference as its module and qualified name and which the
callee imports, as torch pickles functions. Arguments, results and the errors' text travel as
pickles (protocol 5); numpy arrays and torch tensors in them are copied into the pickle.

Security: the callee unpickles what callers send and imports and runs the functions they name.
Like torch.distributed.rpc, this trusts every worker of the job: never run it with workers you do
not trust.

The store the workers meet through: the default process group's store when
c10d.init_process_group() ran first, else the job's rendezvous store from the environment
(env://: MASTER_ADDR, MASTER_PORT), which rank 0 then hosts. A job that wants both a process
group and RPC over env:// calls init_process_group() first, so that both use one store.

GIL: ctypes releases the GIL during every call into the library, so a caller waiting on a reply
lets other threads (and this worker's own serving of calls) run. ctypes takes the GIL again for
each call the agent's threads (num_worker_threads) make into Python: several calls may be in
progress on a worker, but only one runs Python at a time.

Errors: c10d.RemoteError for a call that failed on the callee (its text names the function and
the worker, and carries the remote traceback) or a lost worker, c10d.TimeoutError for a call past
its timeout, c10d.StateError for a call before init_rpc or after shutdown.
"""

import atexit
import importlib
import itertools
import os
import pickle
import re
import sys
import threading
import traceback
from ctypes import byref, c_char_p, c_int, c_size_t, c_void_p, string_at

from . import _capi
from . import distributed as _dist
from ._capi import lib
from .errors import InvalidArgument, StateError
from .store import Store

# The agent reserves names starting with "c10d." for its own messages.
_CALL = b"python.call"
_REMOTE = b"python.remote"
_FETCH = b"python.fetch"
_RELEASE = b"python.release"

_FOREVER_MS = 365 * 24 * 3600 * 1000  # timeout=0 ("no limit") as the C API's positive timeout


class RpcBackendOptions:
    """What TensorPipeRpcBackendOptions sets here: timeouts in seconds, and the threads that run
    incoming calls."""

    def __init__(self, rpc_timeout=60.0, init_timeout=60.0, num_worker_threads=4):
        self.rpc_timeout = rpc_timeout
        self.init_timeout = init_timeout
        self.num_worker_threads = num_worker_threads


class WorkerInfo:
    __slots__ = ("name", "id")

    def __init__(self, name, id):
        self.name = name
        self.id = id

    def __eq__(self, other):
        return isinstance(other, WorkerInfo) and (self.name, self.id) == (other.name, other.id)

    def __hash__(self):
        return hash((self.name, self.id))

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, name={self.name})"


# ---- this process's RPC state ----

_registry = {}  # name -> function, what calls by name find
_owned = {}  # id -> the value of a remote() call this worker ran
_keys = itertools.count(1)  # never reset: an id of an earlier session must not name a new value
_lock = threading.Lock()  # init_rpc and shutdown
_agent = None  # the c10d_rpc*; kept after shutdown (freed by the next init_rpc), see shutdown
_self = None  # WorkerInfo
_running = False
_session = 0  # counts init_rpc calls: each session's keys in the store, and its RRefs
# Cleared while init_rpc runs: the others may finish theirs first and call here, and a function
# served then that calls out must wait for this side's handle rather than find none.
_settled = threading.Event()
_settled.set()
_unsettled = []  # (Future, owner) of RRefs dropped before their remote() call answered


def register(name, fn=None):
    """Lets callers call fn by name on this worker: register(name, fn), @register(name), or
    @register (the function's __name__)."""
    if fn is None:
        if callable(name):
            return register(name.__name__, name)
        return lambda f: register(name, f)
    if not isinstance(name, str) or not callable(fn):
        raise InvalidArgument(f"register: needs a name (str) and a callable, not {name!r} and "
                              f"{fn!r}")
    known = _registry.get(name)
    if known is not None and known is not fn:
        raise InvalidArgument(f"register: '{name}' is already registered as {known!r}")
    _registry[name] = fn
    return fn



def _pickled(obj):
    return pickle.dumps(obj, protocol=5)


# ---- the callee: the C functions the agent runs ----

class _Refused(Exception):
    """A call this worker cannot run; its text is the whole story (no traceback)."""


def _resolve(ref):
    if isinstance(ref, str):
        fn = _registry.get(ref)
        if fn is None:
            raise _Refused(f"no function is registered as '{ref}' on this worker (registered: "
                           f"{', '.join(sorted(_registry)) or 'none'})")
        return fn
    module, qualname = ref
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as e:
        raise _Refused(f"cannot find {module}:{qualname} on this worker: "
                       f"{type(e).__name__}: {e}") from None
    return obj


def _serve_call(data, answer):
    """Runs a call; answer(reply bytes or None, error or None) once, now or, for a function
    marked async_execution, when the future it returns completes. A call made in a distributed
    autograd context (a fourth field) runs in it, its tensors recorded (c10d.dist_autograd)."""
    ref, args, kwargs, *context = pickle.loads(data)
    header = context[0] if context else None
    fn = _resolve(ref)
    if header is None:
        result = fn(*args, **kwargs)
        reply = _pickled
    else:
        from . import dist_autograd
        dist_autograd._received(header, [args, kwargs], header[2])
        with dist_autograd._as_current(header[0]):
            result = fn(*args, **kwargs)

        def reply(value):
            return _pickled(dist_autograd._reply(header, value))
    if not getattr(fn, "_c10d_async_execution", False):
        answer(reply(result), None)
        return
    if not (callable(getattr(result, "add_done_callback", None))
            and callable(getattr(result, "wait", None))):
        raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} is marked async_execution but "
                        f"returned {type(result).__name__}, not a Future")

    def done(future):
        try:
            data = reply(future.wait())
        except BaseException as e:
            answer(None, e)
            return
        answer(data, None)

    result.add_done_callback(done)


def _serve_remote(data):
    ref, args, kwargs = pickle.loads(data)
    value = _resolve(ref)(*args, **kwargs)
    key = next(_keys)
    _owned[key] = value
    return _pickled(key)


def _serve_fetch(data):
    key = pickle.loads(data)
    try:
        return _pickled(_owned[key])
    except KeyError:
        raise _Refused(f"this worker holds no value for RRef {key} (released, or of an earlier "
                       "RPC session)") from None


def _serve_release(data):
    _owned.pop(pickle.loads(data), None)
    return b""


def _failure(e):
    """The caller's view of an exception here: its type, message and traceback."""
    if isinstance(e, _Refused):
        return str(e)
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # the caller wants its function's frames, not this module's
    summary = "".join(traceback.format_exception_only(type(e), e)).strip()
    trace = "".join(traceback.format_exception(type(e), e, tb))
    return f"{summary}\n\nRemote traceback:\n{trace}"


def _c_function(body):
    """body(request bytes) -> reply bytes, as a c10d_rpc_function."""

    def function(user, request, reply):
        # A Python exception must not reach ctypes: it would print it and return 0 (C10D_OK).
        try:
            data, size = c_void_p(), c_size_t()
            _capi.check(lib.c10d_rpc_message_bytes(request, byref(data), byref(size)))
            out = body(string_at(data.value, size.value) if size.value else b"")
            _capi.check(lib.c10d_rpc_message_set_bytes(reply, out, len(out)))
            return _capi.OK
        except BaseException as e:
            try:
                text = _failure(e)
            except BaseException:
                text = f"{type(e).__name__} (its text could not be formatted)"
            lib.c10d_rpc_message_set_error(reply, text.encode("utf-8", "replace"))
            return _capi.ERR_INTERNAL

    return _capi.RpcFunction(function)


def _respond(responder, reply, error):
    """Answers an async call: with reply bytes, or failing with error's text."""
    msg = c_void_p()
    if lib.c10d_rpc_message_new(byref(msg)):
        return  # out of memory: the call times out at the caller
    try:
        if error is None:
            status = lib.c10d_rpc_message_set_bytes(msg, reply, len(reply))
            if status == _capi.OK:
                lib.c10d_rpc_respond(responder, _capi.OK, msg)
                return
            error = _capi.error(status)
        try:
            text = _failure(error)
        except BaseException:
            text = f"{type(error).__name__} (its text could not be formatted)"
        lib.c10d_rpc_message_set_error(msg, text.encode("utf-8", "replace"))
        lib.c10d_rpc_respond(responder, _capi.ERR_INTERNAL, msg)
    finally:
        lib.c10d_rpc_message_free(msg)


def _c_async_function(body):
    """body(request bytes, answer), as a c10d_rpc_async_function: answer(reply, error) responds."""

    def function(user, request, responder):
        answered = []

        def answer(reply, error):
            if not answered:
                answered.append(True)
                _respond(responder, reply, error)

        try:
            data, size = c_void_p(), c_size_t()
            _capi.check(lib.c10d_rpc_message_bytes(request, byref(data), byref(size)))
            body(string_at(data.value, size.value) if size.value else b"", answer)
        except BaseException as e:
            answer(None, e)
        return _capi.OK

    return _capi.RpcAsyncFunction(function)


# The C function objects live as long as the module: the agent may call them until it is freed.
_FUNCTIONS = [(_REMOTE, _c_function(_serve_remote)), (_FETCH, _c_function(_serve_fetch)),
              (_RELEASE, _c_function(_serve_release))]
_ASYNC_FUNCTIONS = [(_CALL, _c_async_function(_serve_call))]


# ---- the caller ----

def _handle():
    if not _running and not _settled.is_set():
        _settled.wait()  # init_rpc ends within its init_timeout, failing or not
    if not _running:
        if _agent is None:
            raise StateError("c10d.rpc: RPC is not initialized; call init_rpc() first")
        raise StateError(f"c10d.rpc: worker '{_self.name}' has shut down RPC")
    return _agent


def _worker_name(to):
    if isinstance(to, WorkerInfo):
        return to.name
    if isinstance(to, str):
        return to
    if isinstance(to, int) and not isinstance(to, bool):
        name = c_char_p()
        _capi.check(lib.c10d_rpc_worker_name(_handle(), to, byref(name)))
        return name.value.decode()
    raise InvalidArgument(f"rpc: to is {to!r}; give the worker's name, id or WorkerInfo")


def _reference(func):
    """What travels for func, and how errors name it."""
    if isinstance(func, str):
        return func, f"'{func}'"
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    if callable(func) and module and qualname and "<" not in qualname:
        try:
            found = _resolve((module, qualname))
        except _Refused:
            found = None
        if found is func:
            return (module, qualname), f"'{module}:{qualname}'"
    raise InvalidArgument(f"rpc: {func!r} is not a registered name nor a function callees can "
                          "import by module and name; define it at module level, or register() "
                          "it on the callee and pass its name")


def _timeout_ms(timeout):
    """torch's convention: seconds; negative: the agent's default; 0: no limit."""
    if timeout is None or timeout < 0:
        return -1
    if timeout == 0:
        return _FOREVER_MS
    return max(1, round(timeout * 1000))


def _error(status, wire, what):
    """The exception for a failed call of wire, naming what the caller called."""
    text = lib.c10d_last_error().decode("utf-8", "replace")
    # The agent names our wire function twice; the callee's own text follows the second.
    text = re.sub(r"function '[\w.]+' returned C10D_ERR_\w+: ", "", text, count=1)
    text = text.replace(f"'{wire.decode()}'", what)
    return _capi.error(status, text.encode())


def _message(payload):
    msg = c_void_p()
    _capi.check(lib.c10d_rpc_message_new(byref(msg)))
    status = lib.c10d_rpc_message_set_bytes(msg, payload, len(payload))
    if status:
        lib.c10d_rpc_message_free(msg)
        raise _capi.error(status)
    return msg


def _reply_bytes(msg):
    """The bytes of a reply, which this frees."""
    data, size = c_void_p(), c_size_t()
    try:
        _capi.check(lib.c10d_rpc_message_bytes(msg, byref(data), byref(size)))
        return string_at(data.value, size.value) if size.value else b""
    finally:
        lib.c10d_rpc_message_free(msg)


def _start(to, wire, what, payload, timeout):
    agent = _handle()
    if _unsettled:
        _settle()
    msg = _message(payload)
    future = c_void_p()
    try:
        status = lib.c10d_rpc_call(agent, _worker_name(to).encode(), wire, msg,
                                   _timeout_ms(timeout), byref(future))
    finally:
        lib.c10d_rpc_message_free(msg)
    if status:
        raise _error(status, wire, what)
    return future.value


def _call_sync(to, wire, what, payload, timeout):
    agent = _handle()
    if _unsettled:
        _settle()
    msg = _message(payload)
    reply = c_void_p()
    try:
        status = lib.c10d_rpc_call_sync(agent, _worker_name(to).encode(), wire, msg,
                                        _timeout_ms(timeout), byref(reply))
    finally:
        lib.c10d_rpc_message_free(msg)
    if status:
        raise _error(status, wire, what)
    return pickle.loads(_reply_bytes(reply))


class Future:
    """The result of rpc_async (and of remote()'s call), or one a program completes itself
    (Future(), then set_result or set_exception), as torch.futures.Future: wait() for it, or
    chain on it with then() and add_done_callback(). A function marked @functions.async_execution
    returns one, and its caller gets the value it completes with."""

    __slots__ = ("_handle", "_wire", "_what", "_outcome", "_lock", "_callbacks", "_on_done",
                 "_event", "_context", "__weakref__")

    def __init__(self, handle=None, wire=None, what="a future"):
        self._handle = handle  # None: completed by set_result / set_exception
        self._wire = wire
        self._what = what
        self._outcome = None  # (value, None) or (None, exception) once it ended
        self._lock = threading.Lock()
        self._callbacks = []
        self._on_done = None  # the C callback that runs them, once registered
        self._event = None if handle else threading.Event()
        self._context = None  # (dist autograd header, callee) of a call made in a context

    def wait(self, timeout=None):
        """The call's result (or its error raised); timeout in seconds (None: until the call
        ends, by its own timeout at the latest) raises c10d.TimeoutError and leaves it running."""
        if self._outcome is None and self._handle is None:
            if not self._event.wait(timeout):
                raise _capi.error(_capi.ERR_TIMEOUT, f"c10d.rpc: {self._what} did not complete "
                                  f"within {timeout} s".encode())
        if self._outcome is None:
            ms = -1 if timeout is None else max(0, round(timeout * 1000))
            reply = c_void_p()
            status = lib.c10d_rpc_future_wait(self._handle, ms, byref(reply))
            if status == _capi.ERR_TIMEOUT and ms >= 0:
                error = _error(status, self._wire, self._what)
                if not self._test():
                    raise error  # this wait's deadline: the call goes on
                # The call ended meanwhile (perhaps by its own timeout): its outcome, at once.
                status = lib.c10d_rpc_future_wait(self._handle, -1, byref(reply))
            with self._lock:
                if self._outcome is None:
                    if status:
                        self._outcome = (None, _error(status, self._wire, self._what))
                    else:
                        try:
                            value = pickle.loads(_reply_bytes(reply))
                            if self._context is not None:
                                from . import dist_autograd
                                dist_autograd._received(self._context[0], value, self._context[1])
                            self._outcome = (value, None)
                        except Exception as e:
                            self._outcome = (None, e)
                elif not status:
                    lib.c10d_rpc_message_free(reply)
        value, error = self._outcome
        if error is not None:
            raise error
        return value

    def done(self):
        return self._outcome is not None or (self._handle is not None and self._test())

    def value(self):
        """The result of a call that has ended (done()); raises its error."""
        if not self.done():
            what = f"the call of {self._what}" if self._handle is not None else self._what
            raise StateError(f"c10d.rpc: {what} has not ended yet; wait() for it")
        return self.wait()

    def set_result(self, result):
        """Completes a future made with Future() with result."""
        self._complete((result, None))

    def set_exception(self, error):
        """Completes a future made with Future() with error, which wait() raises."""
        self._complete((None, error))

    def add_done_callback(self, callback):
        """Runs callback(self) once this future completes (at once when it has): on the thread
        that completes it, one of the RPC agent's for a call. It must not block."""
        with self._lock:
            if self._outcome is None and not (self._handle is not None and self._test()):
                self._callbacks.append(callback)
                if self._handle is None or self._on_done is not None:
                    return
                self._on_done = _capi.RpcCallback(lambda user: self._fired())
                _waiting.add(self)  # until the library has called back
                register = True
            else:
                register = False
        if register:
            # Runs the callbacks at once, on this thread, when the call ended meanwhile.
            _capi.check(lib.c10d_rpc_future_on_done(self._handle, self._on_done, None))
            return
        self._call(callback)

    def then(self, callback):
        """A Future of callback(self), run once this one completes; an exception it raises fails
        the new future."""
        chained = Future(what=f"then() of {self._what}")

        def run(future):
            try:
                result = callback(future)
            except BaseException as e:
                chained.set_exception(e)
                return
            chained.set_result(result)

        self.add_done_callback(run)
        return chained

    def _complete(self, outcome):
        if self._handle is not None:
            raise StateError(f"c10d.rpc: {self._what} completes by itself; only a Future() made "
                             "by the program takes set_result or set_exception")
        with self._lock:
            if self._outcome is not None:
                raise StateError(f"c10d.rpc: {self._what} was completed already")
            self._outcome = outcome
        self._event.set()
        self._run_callbacks()

    def _fired(self):
        _waiting.discard(self)
        self._run_callbacks()

    def _run_callbacks(self):
        with self._lock:
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._call(callback)

    def _call(self, callback):
        try:
            callback(self)
        except BaseException:
            traceback.print_exc()  # as torch: a callback's error does not reach the completer

    def _test(self):
        completed = c_int()
        _capi.check(lib.c10d_rpc_future_test(self._handle, byref(completed)))
        return bool(completed.value)

    # The handle lives as long as this object: another thread may be waiting on it. A registered
    # callback holds this object (through _on_done) until it has run.
    def __del__(self, _free=lib.c10d_rpc_future_free):
        handle, self._handle = self._handle, None
        if handle:
            _free(handle)  # the call may still run: the library keeps its state


# Futures whose callbacks the library will call: kept alive until it has.
_waiting = set()


class _Functions:
    """rpc.functions: async_execution, as torch.distributed.rpc.functions."""

    @staticmethod
    def async_execution(fn):
        """Marks fn as replying later: it returns a Future (ours, or any object with
        add_done_callback and wait, torch.futures.Future included), and its caller gets the
        value that future completes with, or its error, without fn holding one of the callee's
        threads meanwhile. Like torch's, apply it innermost (under @staticmethod)."""
        fn._c10d_async_execution = True
        return fn


functions = _Functions()


def _call_payload(to, func, args, kwargs):
    """(payload, what, dist autograd header or None) of a call of func."""
    ref, what = _reference(func)
    args, kwargs = tuple(args), dict(kwargs or {})
    autograd = sys.modules.get(__package__ + ".dist_autograd")
    if autograd is not None and autograd._current() is not None:
        header, args, kwargs = autograd._outgoing(_worker_name(to), args, kwargs)
        if header is not None:
            return _pickled((ref, args, kwargs, header)), what, header
    return _pickled((ref, args, kwargs)), what, None


def rpc_async(to, func, args=(), kwargs=None, timeout=-1):
    """Calls func(*args, **kwargs) on worker `to` and returns a Future of its result. timeout in
    seconds: negative for rpc_backend_options' rpc_timeout, 0 for none. Inside a distributed
    autograd context (c10d.dist_autograd) the call belongs to it."""
    payload, what, header = _call_payload(to, func, args, kwargs)
    future = Future(_start(to, _CALL, what, payload, timeout), _CALL, what)
    if header is not None:
        future._context = (header, _worker_name(to))
    return future


def rpc_sync(to, func, args=(), kwargs=None, timeout=-1):
    """Calls func(*args, **kwargs) on worker `to` and returns its result."""
    payload, what, header = _call_payload(to, func, args, kwargs)
    if header is None:
        return _call_sync(to, _CALL, what, payload, timeout)
    future = Future(_start(to, _CALL, what, payload, timeout), _CALL, what)
    future._context = (header, _worker_name(to))
    return future.wait()


# ---- remote references ----

class RRef:
    """A value that remote() left on its owner, or RRef(value): one this worker owns (as torch's
    RRef(value)). The owner drops it once this object (the only one for it) is garbage. RRefs do
    not travel as arguments."""

    def __init__(self, owner, future=None, what=None):
        if future is None:  # RRef(value)
            value = owner
            me = _handle() and _self
            key = next(_keys)
            _owned[key] = value
            future = Future(what=f"a {type(value).__name__} of worker '{me.name}'")
            future.set_result(key)
            owner, what = me.name, f"a local {type(value).__name__}"
        self._owner = owner
        self._future = future  # of the remote() call; its result is the value's key
        self._what = what
        self._session = _session

    def owner(self):
        """The owner's WorkerInfo."""
        return get_worker_info(self._owner)

    def owner_name(self):
        return self._owner

    def is_owner(self):
        return _self is not None and self._owner == _self.name

    def _key(self, timeout=-1):
        # The remote() call's own timeout bounds the wait; to_here's may be shorter.
        return self._future.wait(timeout if timeout is not None and timeout > 0 else None)

    def to_here(self, timeout=-1):
        """A copy of the value (the value itself on its owner); the remote() call's error if it
        failed. timeout in seconds, as rpc_sync's."""
        key = self._key(timeout)
        if self.is_owner():
            return self.local_value()
        return _call_sync(self._owner, _FETCH, self._what, _pickled(key), timeout)

    def local_value(self):
        """The value, on its owner."""
        if not self.is_owner():
            raise InvalidArgument(f"RRef.local_value: the value of {self._what} lives on worker "
                                  f"'{self._owner}', not here; use to_here()")
        key = self._key()
        try:
            return _owned[key]
        except KeyError:
            raise StateError(f"RRef.local_value: this worker no longer holds the value of "
                             f"{self._what} (RPC was shut down)") from None

    def __reduce__(self):
        raise InvalidArgument("c10d.rpc: an RRef cannot be sent; send rref.to_here(), or call "
                              "a function on its owner")

    def __repr__(self):
        return f"RRef(owner={self._owner}, {self._what})"

    def __del__(self):
        # Garbage collection may run anywhere, also on the agent's threads: never block here.
        try:
            if not _running or self._session != _session:
                return  # the owners dropped every value at shutdown
            if self._future.done():
                _release_value(self._owner, self._future)
            else:
                _unsettled.append((self._future, self._owner))
        except Exception:
            pass


def _release_value(owner, future):
    """Tells owner to drop the value of a remote() call that has answered (without waiting)."""
    try:
        key = future.wait()
    except Exception:
        return  # the call failed: the owner holds nothing
    if _self is not None and owner == _self.name:
        _owned.pop(key, None)
        return
    msg = _message(_pickled(key))
    call = c_void_p()
    try:
        if lib.c10d_rpc_call(_agent, owner.encode(), _RELEASE, msg, -1, byref(call)) == 0:
            lib.c10d_rpc_future_free(call)  # fire and forget: the library keeps the call
    finally:
        lib.c10d_rpc_message_free(msg)


def _settle():
    """Releases the values of dropped RRefs whose remote() calls have answered since."""
    for entry in list(_unsettled):
        future, owner = entry
        if future.done():
            try:
                _unsettled.remove(entry)
            except ValueError:
                continue  # another thread settled it
            _release_value(owner, future)


def remote(to, func, args=(), kwargs=None, timeout=-1):
    """Runs func(*args, **kwargs) on worker `to`, which keeps the result; returns at once an RRef
    to it (the call's errors reach to_here())."""
    ref, what = _reference(func)
    payload = _pickled((ref, tuple(args), dict(kwargs or {})))
    owner = _worker_name(to)
    return RRef(owner, Future(_start(owner, _REMOTE, what, payload, timeout), _REMOTE, what),
                what)


# ---- the agent ----

def _env_int(name, given):
    if given is not None:
        return int(given)
    value = os.environ.get(name)
    if value is None:
        raise InvalidArgument(f"init_rpc: give {name.lower()}, or set {name}")
    return int(value)


def _store(rank, world_size, init_timeout_ms):
    if _dist.is_initialized():
        base = Store(_capi.created(lib.c10d_group_store, _dist._group(None).handle))
    else:
        options = _capi.init_options(rank=rank, world_size=world_size,
                                     timeout_ms=init_timeout_ms)
        base = Store(_capi.created(lib.c10d_store_connect, options))
    # Each session's keys apart: a later init_rpc must not find the last one's.
    return Store(_capi.created(lib.c10d_store_prefix, f"python.rpc/{_session}".encode(),
                               base.handle))


def init_rpc(name, rank=None, world_size=None, rpc_backend_options=None):
    """Joins the RPC job as worker `name` (unique), with rank and world_size from RANK and
    WORLD_SIZE unless given; returns once every worker has. rpc_backend_options: an
    RpcBackendOptions (or torch's TensorPipeRpcBackendOptions: its rpc_timeout,
    num_worker_threads and init_timeout, when it has one, are used)."""
    global _agent, _self, _running, _session
    options = rpc_backend_options or RpcBackendOptions()
    timeout_ms = _timeout_ms(getattr(options, "rpc_timeout", 60.0))
    init_ms = _timeout_ms(getattr(options, "init_timeout", 60.0))
    rpc_options = _capi.rpc_options(
        timeout_ms=_FOREVER_MS if timeout_ms < 0 else timeout_ms,
        init_timeout_ms=_FOREVER_MS if init_ms < 0 else init_ms,
        threads=int(getattr(options, "num_worker_threads", 4)))
    with _lock:
        if _running:
            raise StateError(f"init_rpc: this process is already worker '{_self.name}'; call "
                             "shutdown() first")
        rank = _env_int("RANK", rank)
        world_size = _env_int("WORLD_SIZE", world_size)
        _session += 1
        store = _store(rank, world_size, rpc_options.init_timeout_ms)
        entries = (_capi.RpcFunctionEntry * len(_FUNCTIONS))(
            *[(wire, function, None) for wire, function in _FUNCTIONS])
        later = (_capi.RpcAsyncFunctionEntry * len(_ASYNC_FUNCTIONS))(
            *[(wire, function, None) for wire, function in _ASYNC_FUNCTIONS])
        rpc_options.async_functions = later
        rpc_options.num_async_functions = len(later)
        _settled.clear()
        try:
            handle = _capi.created(lib.c10d_rpc_init, store.handle, name.encode(), rank,
                                   world_size, entries, len(entries), rpc_options)
            if _agent is not None:
                lib.c10d_rpc_free(_agent)
            _agent, _self, _running = handle, WorkerInfo(name, rank), True
        finally:
            _settled.set()


def get_worker_info(worker_name=None):
    """The WorkerInfo (name, id) of the worker named worker_name (None: this one)."""
    agent = _handle()
    if worker_name is None:
        return _self
    found = c_int()
    _capi.check(lib.c10d_rpc_worker_id(agent, worker_name.encode(), byref(found)))
    return WorkerInfo(worker_name, found.value)


def shutdown(graceful=True):
    """Leaves the RPC job. Graceful: first waits until every worker has answered the calls in
    flight and reached shutdown; otherwise closes at once, failing the calls in flight."""
    global _running
    with _lock:
        agent = _handle()
        # A graceful shutdown first answers the calls in flight, whose functions may call other
        # workers: they still may until it ends (the library refuses calls once it closed).
        if not graceful:
            _running = False
        # The handle stays allocated: a thread may still be about to use it, and the library then
        # refuses the call (StateError) rather than touching freed memory.
        status = lib.c10d_rpc_shutdown(agent, int(bool(graceful)))
        _running = False
        error = _capi.error(status) if status else None
        _owned.clear()
        _unsettled.clear()
    if error is not None:
        raise error


@atexit.register
def _shutdown_at_exit():
    # The agent's threads must not run functions while the interpreter is finalizing.
    if _running:
        shutdown(graceful=False)
