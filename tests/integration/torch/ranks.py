"""Starts a job's ranks as separate processes, as a launcher does, for the torch backend's tests.

run_ranks(argv, world_size, timeout) runs `python3 argv...` once per rank with MASTER_ADDR,
MASTER_PORT (from tests/support/free_port.py, below the ephemeral range), RANK and WORLD_SIZE set, and
returns their exit codes in rank order: a negative code is a signal, "hung" means a rank was
still running after timeout seconds (every rank is then killed).
"""

import os
import subprocess
import sys

FREE_PORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support", "free_port.py")


def run_ranks(argv, world_size, timeout):
    port = subprocess.check_output([sys.executable, FREE_PORT], text=True).strip()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=str(world_size))
    procs = [subprocess.Popen([sys.executable, *argv], env=dict(env, RANK=str(rank)))
             for rank in range(world_size)]
    try:
        return [p.wait(timeout=timeout) for p in procs]
    except subprocess.TimeoutExpired:
        return ["hung"] * world_size
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
