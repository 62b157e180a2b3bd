"""Every Store method on HashStore, FileStore, TCPStore and PrefixStore, and their timeouts."""

import threading
from datetime import timedelta

import pytest

import c10d
import world

SHORT = timedelta(milliseconds=200)


@pytest.fixture(params=["hash", "file", "tcp", "prefix"])
def store(request, tmp_path):
    if request.param == "hash":
        return c10d.HashStore()
    if request.param == "file":
        return c10d.FileStore(str(tmp_path / "store"), 1)
    if request.param == "tcp":
        return c10d.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=10))
    return c10d.PrefixStore("job", c10d.HashStore())


def test_set_get_add_compare_set(store):
    store.set("text", "héllo")
    store.set("raw", b"\x00\x01\xff")
    store.set("empty", b"")
    assert store.get("text") == "héllo".encode()
    assert store.get("raw") == b"\x00\x01\xff"
    assert store.get("empty") == b""
    assert store.add("counter", 5) == 5
    assert store.add("counter", -2) == 3
    assert store.get("counter") == b"3"
    # compare_set: absent key with empty expected sets it; a mismatch returns the current value
    assert store.compare_set("cas", "", "first") == b"first"
    assert store.compare_set("cas", "wrong", "second") == b"first"
    assert store.compare_set("cas", "first", "second") == b"second"
    assert store.get("cas") == b"second"
    assert store.compare_set("absent", "expected", "x") == b"expected"
    assert not store.check(["absent"])


def test_wait_check_delete_num_keys(store):
    before = store.num_keys()
    store.set("a", "1")
    store.set("b", "2")
    assert store.num_keys() == before + 2
    store.wait(["a", "b"])
    store.wait(["a"], timedelta(seconds=1))
    assert store.check(["a", "b"])
    assert not store.check(["a", "missing"])
    assert store.delete_key("a") is True
    assert store.delete_key("a") is False
    assert not store.check(["a"])
    assert store.num_keys() == before + 1


def test_wait_for_a_key_set_later(store):
    # A TCPStore serialises the calls on its connection: the setter needs a connection of its own.
    other = c10d.TCPStore("127.0.0.1", store.port) if isinstance(store, c10d.TCPStore) else store
    setter = threading.Timer(0.1, other.set, ("late", "here"))
    setter.start()
    try:
        store.wait(["late"], timedelta(seconds=5))
        assert store.get("late") == b"here"
    finally:
        setter.join()


def test_timeouts_name_the_key(store):
    with pytest.raises(c10d.TimeoutError, match="never-set"):
        store.wait(["never-set"], SHORT)
    store.set_timeout(SHORT)
    assert store.timeout == SHORT
    with pytest.raises(c10d.TimeoutError, match="also-never-set") as caught:
        store.get("also-never-set")
    # the torch-compatible base classes
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, RuntimeError)
    assert c10d.DistStoreError is c10d.StoreError


def test_prefix_store_shares_the_base_under_its_prefix():
    base = c10d.HashStore()
    prefixed = c10d.PrefixStore("trainer", base)
    prefixed.set("step", "7")
    assert base.get("trainer/step") == b"7"
    assert prefixed.underlying_store is base
    del base  # the prefix store keeps what it needs
    assert prefixed.get("step") == b"7"


def test_tcp_store_waits_for_workers():
    port = world.free_port()
    clients = []
    # The constructors return once both have connected, so the client connects from a thread.
    joiner = threading.Thread(target=lambda: clients.append(
        c10d.TCPStore("127.0.0.1", port, 2, False, timeout=timedelta(seconds=10))))
    joiner.start()
    master = c10d.TCPStore("127.0.0.1", port, 2, True, timeout=timedelta(seconds=10))
    joiner.join()
    (client,) = clients
    assert master.port == client.port == port
    client.set("from client", "hi")
    assert master.get("from client") == b"hi"


def test_tcp_store_without_server_times_out():
    port = world.free_port()
    with pytest.raises(c10d.TimeoutError):
        c10d.TCPStore("127.0.0.1", port, timeout=timedelta(milliseconds=300))


def test_file_store_is_shared_through_its_path(tmp_path):
    path = str(tmp_path / "shared")
    one, two = c10d.FileStore(path, 2), c10d.FileStore(path, 2)
    one.set("k", "v")
    assert two.get("k") == b"v"
    assert two.add("n", 1) == 1 and one.add("n", 1) == 2


def test_bad_arguments():
    with pytest.raises(c10d.InvalidArgument):
        c10d.FileStore("/tmp/x", 1, timeout=timedelta(0))
    with pytest.raises(c10d.InvalidArgument, match="not a c10d Store"):
        c10d.PrefixStore("p", object())


def test_queues_as_torch_2_6(store):
    assert store.queue_len("jobs") == 0
    with pytest.raises(c10d.DistQueueEmptyError, match="jobs"):
        store.queue_pop("jobs", block=False)
    store.queue_push("jobs", "first")
    store.queue_push("jobs", b"\x00second")
    assert store.queue_len("jobs") == 2
    assert store.queue_pop("jobs") == b"first"
    assert store.queue_pop("jobs", block=False) == b"\x00second"
    with pytest.raises(c10d.TimeoutError, match="jobs"):
        store.queue_pop("jobs", timeout=SHORT)
    assert isinstance(c10d.DistQueueEmptyError("x"), c10d.DistStoreError)


def _queue_worker(rank, world_size):
    # Rank 0 hosts the store and hands out one job per other rank; each pushes its answer back.
    import os
    store = c10d.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), world_size, rank == 0,
                          timeout=timedelta(seconds=30))
    if rank == 0:
        for job in range(1, world_size):
            store.queue_push("jobs", str(job * 10))
        answers = sorted(int(store.queue_pop("answers", timeout=timedelta(seconds=30)))
                         for _ in range(1, world_size))
        store.set("done", "1")
        # The server lives in this process: it stays until every rank has seen "done" (a rank
        # still on its way to the wait found the server gone under load).
        store.wait([f"seen/{r}" for r in range(1, world_size)])
        return answers
    job = int(store.queue_pop("jobs", timeout=timedelta(seconds=30)))
    store.queue_push("answers", str(job + rank))
    store.wait(["done"])
    store.set(f"seen/{rank}", "1")
    return job


def test_queue_across_ranks():
    results = world.run(_queue_worker, 4, init=False)
    jobs = sorted(results[1:])
    assert jobs == [10, 20, 30]  # each job went to exactly one rank
    assert results[0] == sorted(job + rank for rank, job in enumerate(results) if rank > 0)
