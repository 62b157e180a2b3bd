"""c10d.rpc between real processes: calls by registered name and by module-level function, sync
and async, tensors in arguments, remote references, remote errors with their traceback,
timeouts, and calls after shutdown.

Workers import this module to find the functions callers pass by reference (world.py's spawned
ranks already import it, to find the function they run)."""

import gc
import time

import numpy as np
import pytest

import c10d
import world
from c10d import rpc


def add(a, b=0):
    return a + b


def fail(x):
    raise ValueError(f"bad input {x}")


def sleepy(seconds):
    time.sleep(seconds)
    return seconds


@rpc.register("scale")
def scale(tensor, factor=2):
    return tensor * factor


def owned_count():
    return len(rpc._owned)


def relay(to, x):
    """A call that makes a call of its own (the GIL is free while it waits)."""
    return rpc.rpc_sync(to, "add", (x, 1))


def run_two(rank, size):
    import torch

    me, other = f"worker{rank}", f"worker{1 - rank}"
    rpc.register("add", add)
    rpc.init_rpc(me)  # rank and world size from RANK and WORLD_SIZE; the default group's store
    assert rpc.get_worker_info() == rpc.WorkerInfo(me, rank)
    assert rpc.get_worker_info(other).id == 1 - rank

    # by name and by reference, sync and async, args and kwargs
    assert rpc.rpc_sync(other, "add", (1, 2)) == 3
    assert rpc.rpc_sync(1 - rank, "add", (1, 3)) == 4  # by the worker's id
    assert rpc.rpc_sync(other, add, (1,), {"b": 5}) == 6
    future = rpc.rpc_async(other, add, ("a", "b"))
    assert future.wait() == "ab" and future.done() and future.value() == "ab"
    futures = [rpc.rpc_async(rpc.get_worker_info(other), "add", (i, i)) for i in range(8)]
    assert [f.wait() for f in futures] == [2 * i for i in range(8)]
    assert rpc.rpc_sync(me, add, (2, 2)) == 4  # to oneself

    # tensors inside the arguments and the result
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(rpc.rpc_sync(other, "scale", (array,)), array * 2)
    doubled = rpc.rpc_sync(other, scale, (torch.arange(4.0),), {"factor": 3})
    assert isinstance(doubled, torch.Tensor) and doubled.tolist() == [0.0, 3.0, 6.0, 9.0]

    # a name registered after init_rpc
    rpc.register("late", lambda: f"late on {me}")
    c10d.barrier()
    assert rpc.rpc_sync(other, "late") == f"late on {other}"

    # remote references: the value stays on its owner until the last RRef here is garbage
    ref = rpc.remote(other, scale, (np.ones(3),), {"factor": rank + 1})
    np.testing.assert_array_equal(ref.to_here(), np.full(3, rank + 1))
    assert ref.owner() == rpc.WorkerInfo(other, 1 - rank) and ref.owner_name() == other
    assert not ref.is_owner()
    with pytest.raises(c10d.InvalidArgument, match="lives on worker"):
        ref.local_value()
    mine = rpc.remote(me, add, ([1],), {"b": [2]})
    assert mine.is_owner() and mine.local_value() == [1, 2]
    assert mine.to_here() is mine.local_value()
    c10d.barrier()
    assert rpc.rpc_sync(other, owned_count) == 2  # what `ref`, and the peer's `mine`, refer to
    c10d.barrier()  # both have counted before either drops its references
    del ref, mine
    gc.collect()
    world.wait_until(lambda: rpc.rpc_sync(other, owned_count) == 0, 5.0)
    # an RRef dropped before its call answered: released once it has
    rpc.remote(other, sleepy, (0.2,))
    gc.collect()
    world.wait_until(lambda: rpc.rpc_sync(other, owned_count) == 0 and not rpc._unsettled,
                     5.0)
    failed = rpc.remote(other, fail, (3,))
    with pytest.raises(c10d.RemoteError, match="bad input 3"):
        failed.to_here()

    # a remote exception: RemoteError naming the function and the worker, with its traceback
    with pytest.raises(c10d.RemoteError) as error:
        rpc.rpc_sync(other, fail, (7,))
    text = str(error.value)
    assert "'test_rpc:fail'" in text and f"worker '{other}'" in text, text
    assert "ValueError: bad input 7" in text and "Remote traceback" in text, text
    assert 'test_rpc.py", line' in text and "in fail" in text, text
    failing = rpc.rpc_async(other, fail, (8,))
    for _ in range(2):  # the same error on every wait
        with pytest.raises(c10d.RemoteError, match="bad input 8"):
            failing.wait()
    with pytest.raises(c10d.RemoteError, match=r"unsupported operand.*\+"):
        rpc.rpc_sync(other, "add", (1, "x"))

    # an unknown name
    with pytest.raises(c10d.RemoteError, match=r"'nope'.*no function is registered as 'nope'"):
        rpc.rpc_sync(other, "nope")
    # what cannot travel by reference, and an unknown worker
    with pytest.raises(c10d.InvalidArgument, match="module level"):
        rpc.rpc_sync(other, lambda: 1)
    with pytest.raises(c10d.InvalidArgument, match="no worker named 'nobody'"):
        rpc.rpc_sync("nobody", "add", (1, 2))

    # timeouts: the call's own, and a wait's (which leaves the call running)
    with pytest.raises(c10d.TimeoutError, match=r"'test_rpc:sleepy'.*timed out after 100 ms"):
        rpc.rpc_sync(other, sleepy, (0.5,), timeout=0.1)
    slow = rpc.rpc_async(other, sleepy, (0.3,))
    with pytest.raises(c10d.TimeoutError):
        slow.wait(timeout=0.05)
    assert not slow.done()
    with pytest.raises(c10d.StateError, match="not ended"):
        slow.value()
    assert slow.wait() == 0.3 and slow.value() == 0.3

    c10d.barrier()
    rpc.shutdown()
    with pytest.raises(c10d.StateError, match="shut down"):
        rpc.rpc_sync(other, "add", (1, 2))
    with pytest.raises(c10d.StateError):
        rpc.rpc_async(other, add, (1, 2))
    with pytest.raises(c10d.StateError):
        rpc.shutdown()


def test_two_workers():
    world.run(run_two, 2)


def run_three(rank, size):
    # No process group: init_rpc meets the others through the env:// store.
    rpc.register("add", add)
    options = rpc.RpcBackendOptions(rpc_timeout=20.0, num_worker_threads=3)
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=size, rpc_backend_options=options)
    peers = [f"w{r}" for r in range(size) if r != rank]
    futures = [rpc.rpc_async(p, add, (rank,), {"b": 10}) for p in peers]
    assert [f.wait() for f in futures] == [rank + 10] * 2
    # the next worker asks the one after it: a call inside a call
    nxt, after = f"w{(rank + 1) % size}", f"w{(rank + 2) % size}"
    assert rpc.rpc_sync(nxt, relay, (after, rank)) == rank + 1
    ref = rpc.remote(after, add, (rank * 100,))
    assert ref.to_here() == rank * 100 and ref.owner().name == after
    with pytest.raises(c10d.RemoteError, match=f"worker '{nxt}'"):
        rpc.rpc_sync(nxt, fail, (rank,))
    rpc.shutdown()
    with pytest.raises(c10d.StateError):
        rpc.rpc_sync(nxt, "add", (1, 2))


def test_three_workers_env_store():
    world.run(run_three, 3, init=False)


@rpc.functions.async_execution
def add_then(to, x, y, z):
    """Replies later: chains on a call to another worker, as PyTorch's RPC tutorial does."""
    return rpc.rpc_async(to, add, (x, y)).then(lambda fut: fut.wait() + z)


_held = []


@rpc.functions.async_execution
def held_until_release(k):
    future = rpc.Future()
    _held.append((future, k))
    return future


def release(value):
    count = len(_held)
    for future, k in _held:
        future.set_result(value * k)
    _held.clear()
    return count


@rpc.functions.async_execution
def fails_later(to):
    return rpc.rpc_async(to, fail, ("chained",))


@rpc.functions.async_execution
def not_a_future():
    return 5


def run_async_execution(rank, size):
    # One thread per worker: a held call must not hold it, or release() could never run.
    options = rpc.RpcBackendOptions(rpc_timeout=30.0, num_worker_threads=1)
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=size, rpc_backend_options=options)
    if rank == 0:
        assert rpc.rpc_sync("w1", add_then, ("w2", 1, 2, 30)) == 33
        held = [rpc.rpc_async("w1", held_until_release, (k,)) for k in range(1, 9)]
        assert rpc.rpc_sync("w1", release, (5,)) == 8
        assert [f.wait() for f in held] == [5 * k for k in range(1, 9)]
        chained = rpc.rpc_async("w1", add_then, ("w2", 2, 2, 2)).then(lambda f: f.wait() * 10)
        assert chained.wait() == 60
        with pytest.raises(c10d.RemoteError, match="bad input chained"):
            rpc.rpc_sync("w1", fails_later, ("w2",))
        with pytest.raises(c10d.RemoteError, match="not a Future"):
            rpc.rpc_sync("w1", not_a_future)
    rpc.shutdown()


def test_async_execution_replies_when_its_future_completes():
    world.run(run_async_execution, 3, init=False)


def test_a_future_a_program_completes():
    future = rpc.Future()
    seen = []
    future.add_done_callback(lambda f: seen.append(f.wait()))
    doubled = future.then(lambda f: f.wait() * 2)
    assert not future.done()
    with pytest.raises(c10d.TimeoutError):
        future.wait(timeout=0.01)
    future.set_result(21)
    assert future.wait() == 21 and doubled.wait() == 42 and seen == [21]
    with pytest.raises(c10d.StateError, match="completed already"):
        future.set_result(1)
    failed = rpc.Future()
    failed.set_exception(ValueError("nope"))
    with pytest.raises(ValueError, match="nope"):
        failed.then(lambda f: f.wait()).wait()


def run_late_init(rank, size):
    # Rank 1's init_rpc returns late (its agent serves already): rank 0's relay reaches it first,
    # and relay's own call must wait for rank 1's handle rather than fail "not initialized".
    from c10d import _capi
    created = _capi.created

    def slow_created(*args):
        handle = created(*args)
        if rank == 1:
            time.sleep(1.0)
        return handle

    _capi.created = slow_created
    rpc.register("add", add)
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=size)
    _capi.created = created
    if rank == 0:
        assert rpc.rpc_sync("w1", relay, ("w0", 41)) == 42
    rpc.shutdown()


def test_a_call_served_before_init_rpc_returns_may_call_out():
    world.run(run_late_init, 2, init=False)


def test_not_initialized():
    with pytest.raises(c10d.StateError, match="init_rpc"):
        rpc.rpc_sync("worker0", "add", (1, 2))
    with pytest.raises(c10d.StateError, match="init_rpc"):
        rpc.get_worker_info()


def test_rpc_in_a_process_that_imported_torch_first():
    # With libtorch loaded first, c10d's thread-locals are allocated dynamically; TLS descriptors
    # then crashed the RPC agent's loop thread (glibc before 2.40 clobbers registers there).
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys
    program = (
        "import torch\n"
        "from c10d import rpc\n"
        "rpc.register('add', lambda a, b: a + b)\n"
        "rpc.init_rpc('solo', rank=0, world_size=1)\n"
        "assert rpc.rpc_sync('solo', 'add', (2, 3)) == 5\n"
        "rpc.shutdown()\n"
        "print('ok')\n")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(world.free_port()))
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
