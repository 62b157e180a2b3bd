"""torch.multiprocessing.spawn for c10d jobs on one host.

    import c10d.multiprocessing as mp
    mp.spawn(train, args=(world_size,), nprocs=world_size)  # train(rank, world_size) per process

spawn starts nprocs processes (multiprocessing's spawn context), each calling fn(rank, *args),
and returns once all have exited 0. When one fails, the others are stopped (they may be waiting
on it forever) and spawn raises, naming the rank: ProcessRaisedException with its traceback when
fn raised, ProcessExitedException with its exit code or signal otherwise.

Unlike torch's, spawn completes the rendezvous the environment lacks, in the children's
environment only: MASTER_ADDR=127.0.0.1, and for MASTER_PORT a port the operating system reports
free. A guessed port can be taken: a random one from the ephemeral range collided with another
job's connection in CI.
"""

import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import traceback

from .errors import InvalidArgument

__all__ = ["ProcessException", "ProcessExitedException", "ProcessRaisedException", "spawn"]

# A child writes its traceback into a pipe the parent reads only after the child exited; a
# traceback larger than the pipe's buffer (64 KiB on Linux) would block that exit forever.
_MAX_TRACEBACK_CHARS = 32 * 1024
# How long stopped ranks get to exit on SIGTERM before SIGKILL.
_STOP_GRACE_S = 5.0


class ProcessException(Exception):
    """A rank of spawn() failed; error_index is its rank, pid its process id."""

    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """fn raised in a rank; the message carries the rank's traceback."""


class ProcessExitedException(ProcessException):
    """A rank exited with a nonzero code, or a signal (signal_name) ended it."""

    def __init__(self, msg, error_index, pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code,
                            self.signal_name)


def _free_port(host="127.0.0.1"):
    """A TCP port on host that nothing uses now (the OS's pick for port 0)."""
    family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _rendezvous():
    """What the children's environment lacks of MASTER_ADDR and MASTER_PORT."""
    missing = {}
    addr = os.environ.get("MASTER_ADDR")
    if addr is None:
        addr = missing["MASTER_ADDR"] = "127.0.0.1"
    if "MASTER_PORT" not in os.environ:
        try:
            missing["MASTER_PORT"] = str(_free_port(addr))
        except OSError as e:
            raise InvalidArgument(
                f"c10d.multiprocessing.spawn: MASTER_PORT is unset and no port could be bound "
                f"on MASTER_ADDR={addr} ({e}); set MASTER_PORT, or MASTER_ADDR to an address of "
                f"this host") from None
    return missing


def _run(fn, rank, rendezvous, args, errors):
    os.environ.update(rendezvous)
    try:
        fn(rank, *args)
    except KeyboardInterrupt:
        pass  # the parent stops the job
    except Exception:
        errors.put(traceback.format_exc()[-_MAX_TRACEBACK_CHARS:])
        sys.exit(1)


def _failure(rank, process, errors):
    if not errors.empty():
        return ProcessRaisedException(f"rank {rank} (pid {process.pid}) raised:\n{errors.get()}",
                                      rank, process.pid)
    code = process.exitcode
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return ProcessExitedException(f"rank {rank} (pid {process.pid}) was ended by {name}",
                                      rank, process.pid, code, name)
    return ProcessExitedException(f"rank {rank} (pid {process.pid}) exited with code {code}",
                                  rank, process.pid, code)


def _stop(processes):
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        p.terminate()
    for p in alive:
        p.join(_STOP_GRACE_S)
        if p.is_alive():
            p.kill()
            p.join()


def spawn(fn, args=(), nprocs=1, start_method="spawn"):
    """Runs fn(rank, *args) in nprocs processes; returns when all exited 0, else raises a
    ProcessException for the first rank seen failing, after stopping the others."""
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise InvalidArgument(f"c10d.multiprocessing.spawn: nprocs must be an int >= 1, "
                              f"got {nprocs!r}")
    if not callable(fn):
        raise InvalidArgument(f"c10d.multiprocessing.spawn: fn must be callable, got {fn!r}")
    context = multiprocessing.get_context(start_method)
    rendezvous = _rendezvous()
    errors = [context.SimpleQueue() for _ in range(nprocs)]
    processes = []
    try:
        for rank in range(nprocs):
            p = context.Process(target=_run, name=f"rank {rank}",
                                args=(fn, rank, rendezvous, tuple(args), errors[rank]))
            p.start()
            processes.append(p)
        running = {p.sentinel: rank for rank, p in enumerate(processes)}
        while running:
            ended = multiprocessing.connection.wait(list(running))
            for rank in sorted(running.pop(s) for s in ended):
                p = processes[rank]
                p.join()
                if p.exitcode != 0:
                    raise _failure(rank, p, errors[rank])
    finally:
        _stop(processes)
