"""Runs a test function on N ranks, each a real process (multiprocessing's spawn context).

run(fn, world_size, *args) starts world_size processes with MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set, each calling fn(rank, world_size, *args) after
c10d.init_process_group() (unless init=False). It returns what each rank's fn returned, in rank
order. A rank that raises fails the test with that rank's traceback; ranks still running after
`timeout` seconds are killed and the test fails naming them.
"""

import multiprocessing
import os
import queue
import time
import traceback

from c10d.multiprocessing import _free_port as free_port

DEFAULT_TIMEOUT = 60.0


def _child(fn, rank, world_size, port, init, args, results):
    # What a launcher (c10drun, torchrun) sets; LOCAL_WORLD_SIZE also tells c10d whether each
    # rank has a core to spin on.
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size))
    try:
        import c10d
        if init:
            c10d.init_process_group("gloo")
        value = fn(rank, world_size, *args)
        if init and c10d.is_initialized():
            # Rank 0 hosts the store: it must not exit while others still use it.
            c10d.barrier()
            c10d.destroy_process_group()
        results.put((rank, True, value))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
        results.close()
        results.join_thread()
        # Not a normal exit: its groups may wait on peers that will never come.
        os._exit(1)


def run(fn, world_size, *args, init=True, timeout=DEFAULT_TIMEOUT):
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = free_port()
    processes = [context.Process(target=_child, name=f"rank {r}",
                                 args=(fn, r, world_size, port, init, args, results))
                 for r in range(world_size)]
    for p in processes:
        p.start()
    outcomes = {}
    failures = []
    deadline = time.monotonic() + timeout
    try:
        while len(outcomes) < world_size:
            try:
                rank, ok, value = results.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            outcomes[rank] = value
            if not ok:
                failures.append(f"rank {rank} raised:\n{value}")
                break  # its peers may now wait forever on it: stop them below
    finally:
        # Ranks that all reported get time to exit; the others are stuck: kill them soon.
        finished = len(outcomes) == world_size and not failures
        grace = time.monotonic() + (5.0 if finished else 1.0)
        for p in processes:
            p.join(max(0.0, grace - time.monotonic()))
        hung = [p.name for p in processes if p.is_alive()]
        for p in processes:
            if p.is_alive():
                p.kill()
                p.join()
    if failures:
        raise AssertionError("\n".join(failures))
    missing = [r for r in range(world_size) if r not in outcomes]
    if missing:
        codes = {p.name: p.exitcode for p in processes}
        raise AssertionError(f"ranks {missing} did not finish within {timeout} s (killed: {hung}; "
                             f"exit codes {codes})")
    return [outcomes[r] for r in range(world_size)]


def wait_until(predicate, seconds=10.0):
    """Polls predicate until it holds; fails the test after seconds."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)
