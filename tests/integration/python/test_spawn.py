"""c10d.multiprocessing.spawn: ranks get their rank, the arguments and a rendezvous; a rank that
raises, exits or is killed is named, and the ranks still waiting on it are stopped."""

import os
import signal
import socket
import time
from datetime import timedelta

import numpy as np
import pytest

import c10d
import c10d.multiprocessing as mp

# Longer than any test here may take: a rank still waiting when spawn returns was stopped by it.
PEER_TIMEOUT = timedelta(minutes=10)


def _sum_ranks(rank, world_size, out_dir):
    c10d.init_process_group("gloo", rank=rank, world_size=world_size)
    value = np.array([rank + 1.0])
    c10d.all_reduce(value)
    with open(os.path.join(out_dir, str(rank)), "w") as f:
        f.write(f"{value[0]} {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}")
    c10d.barrier()
    c10d.destroy_process_group()


def _fail_on_rank_one(rank, world_size):
    if rank == 1:
        raise ValueError("bad input on rank 1")
    c10d.init_process_group("gloo", rank=rank, world_size=world_size, timeout=PEER_TIMEOUT)
    c10d.barrier()


def _exit_on_rank_zero(rank, code):
    if rank == 0:
        os._exit(code)
    time.sleep(PEER_TIMEOUT.total_seconds())


def _killed_on_rank_one(rank):
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(PEER_TIMEOUT.total_seconds())


def _join(rank, world_size):
    c10d.init_process_group("gloo", rank=rank, world_size=world_size, timeout=PEER_TIMEOUT)


@pytest.fixture
def no_rendezvous(monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)


def test_each_rank_runs_fn_with_its_rank_arguments_and_one_rendezvous(tmp_path, no_rendezvous):
    mp.spawn(_sum_ranks, args=(3, str(tmp_path)), nprocs=3)
    results = [(tmp_path / str(rank)).read_text().split() for rank in range(3)]
    assert [float(total) for total, _ in results] == [6.0, 6.0, 6.0]
    endpoints = {endpoint for _, endpoint in results}
    assert len(endpoints) == 1 and endpoints.pop().startswith("127.0.0.1:")
    assert "MASTER_PORT" not in os.environ  # the children's rendezvous, not the caller's


def test_a_rank_that_raises_is_named_with_its_traceback_and_the_waiting_ranks_are_stopped(
        no_rendezvous):
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException) as raised:
        mp.spawn(_fail_on_rank_one, args=(3,), nprocs=3)
    took = time.monotonic() - start
    assert raised.value.error_index == 1
    assert "rank 1 (pid" in str(raised.value)
    assert "ValueError: bad input on rank 1" in str(raised.value)
    # Ranks 0 and 2 wait for rank 1 up to PEER_TIMEOUT unless spawn stops them.
    assert took < 60, f"spawn took {took:.1f} s: it did not stop the ranks waiting on rank 1"


def test_a_rank_that_exits_or_is_killed_is_named_with_its_code_or_signal(no_rendezvous):
    with pytest.raises(mp.ProcessExitedException) as exited:
        mp.spawn(_exit_on_rank_zero, args=(3,), nprocs=2)
    assert exited.value.error_index == 0 and exited.value.exit_code == 3
    assert "rank 0 (pid" in str(exited.value) and "exited with code 3" in str(exited.value)
    with pytest.raises(mp.ProcessExitedException) as killed:
        mp.spawn(_killed_on_rank_one, nprocs=2)
    assert killed.value.error_index == 1 and killed.value.signal_name == "SIGKILL"
    assert "rank 1 (pid" in str(killed.value) and "ended by SIGKILL" in str(killed.value)


def test_a_taken_master_port_fails_rank_zero_and_stops_the_others(monkeypatch):
    # What failed CI: another job held the port rank 0 was to host the store on.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(squatter.getsockname()[1]))
        with pytest.raises(mp.ProcessRaisedException) as raised:
            mp.spawn(_join, args=(2,), nprocs=2)
    assert raised.value.error_index == 0
    assert "EADDRINUSE" in str(raised.value) and "MASTER_PORT" in str(raised.value)


@pytest.mark.parametrize("nprocs", [0, -1, "2", 1.5, True])
def test_a_bad_process_count_is_refused(nprocs):
    with pytest.raises(c10d.InvalidArgument, match="nprocs must be an int >= 1"):
        mp.spawn(_join, args=(1,), nprocs=nprocs)


def test_a_function_that_is_not_callable_is_refused():
    with pytest.raises(c10d.InvalidArgument, match="fn must be callable"):
        mp.spawn("train", nprocs=1)


def test_a_missing_master_addr_is_this_host_and_a_set_port_is_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    port = str(mp._free_port())
    monkeypatch.setenv("MASTER_PORT", port)
    mp.spawn(_sum_ranks, args=(2, str(tmp_path)), nprocs=2)
    assert (tmp_path / "1").read_text() == f"3.0 127.0.0.1:{port}"
    assert "MASTER_ADDR" not in os.environ


def test_a_master_addr_not_on_this_host_without_a_port_is_refused(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "192.0.2.1")  # TEST-NET-1: never a local address
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(c10d.InvalidArgument, match="MASTER_PORT is unset .*MASTER_ADDR=192.0.2.1"):
        mp.spawn(_join, args=(1,), nprocs=1)
