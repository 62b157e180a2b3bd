"""The GIL is released while an operation blocks: another Python thread of the same rank keeps
running during a blocking recv (ctypes drops the GIL for every foreign call)."""

import threading
import time

import numpy as np

import world


def run_blocked_recv(rank, size):
    import c10d as dist
    if rank == 0:
        time.sleep(0.5)  # rank 1 sits in recv meanwhile
        dist.send(np.ones(4, np.float32), 1)
        return None
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.05)  # let the counter get going
    before = counted[0]
    buffer = np.zeros(4, np.float32)
    start = time.perf_counter()
    dist.recv(buffer, 0)
    blocked = time.perf_counter() - start
    during = counted[0] - before
    stop.set()
    counter.join()
    np.testing.assert_array_equal(buffer, np.ones(4, np.float32))
    return blocked, during


def test_another_thread_runs_while_recv_blocks():
    _, (blocked, during) = world.run(run_blocked_recv, 2)
    assert blocked > 0.2, f"recv returned after {blocked:.3f} s; rank 0 sent after 0.5 s"
    # Holding the GIL would have frozen the counter for the whole recv; with it released the
    # counter runs about a million times in 0.4 s. A thousand rules out the first case.
    assert during > 1000, f"the counter ran {during} times while recv blocked for {blocked:.3f} s"
