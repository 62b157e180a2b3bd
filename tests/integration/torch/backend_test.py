"""c10d.torch as a user meets it: torch.distributed programs on 2 ranks with backend "c10d".

    backend_test.py              runs every case below in fresh processes; exit 0 when all pass

Cases: each rendezvous torch offers (env://, tcp://, file://, a TCPStore, FileStore and
PrefixStore passed as store=); every operation with its result checked; the Work API (wait with
a timeout, is_completed, source_rank, result, get_future); subgroups; errors that must arrive as
Python exceptions with our message (a shape mismatch, an unsupported dtype, a receive that times
out) and a peer killed mid-job, which must fail the survivor's collective, not hang it.
"""

import datetime
import os
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist

from ranks import run_ranks

TIMEOUT = datetime.timedelta(seconds=20)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def init(case, rank, size, scratch):
    import c10d.torch

    backend = c10d.torch.BACKEND
    port = int(os.environ["MASTER_PORT"])
    if case == "env":
        dist.init_process_group(backend, timeout=TIMEOUT)
    elif case == "tcp":
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=size, timeout=TIMEOUT)
    elif case == "file":
        dist.init_process_group(backend, init_method=f"file://{scratch}/rendezvous", rank=rank,
                                world_size=size, timeout=TIMEOUT)
    elif case == "tcpstore":
        store = dist.TCPStore("127.0.0.1", port, size, rank == 0, TIMEOUT)
        dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=TIMEOUT)
    elif case == "filestore":
        store = dist.FileStore(f"{scratch}/store", size)
        dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=TIMEOUT)
    elif case == "prefixstore":
        store = dist.PrefixStore("job7", dist.TCPStore("127.0.0.1", port, size, rank == 0, TIMEOUT))
        dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=TIMEOUT)
    else:
        dist.init_process_group(backend, timeout=TIMEOUT)
    check(dist.get_backend() == backend, f"get_backend() is {dist.get_backend()}")


def every_op(rank, size):
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((4,), 3.0)), f"all_reduce {t}")
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(torch.equal(t, torch.full((3,), 2.0)), f"all_reduce max {t}")
    t = torch.full((2,), 5, dtype=torch.int64) if rank == 0 else torch.zeros(2, dtype=torch.int64)
    dist.broadcast(t, src=0)
    check(torch.equal(t, torch.full((2,), 5, dtype=torch.int64)), f"broadcast {t}")
    t = torch.full((2,), float(rank + 1))
    dist.reduce(t, dst=1)
    if rank == 1:
        check(torch.equal(t, torch.full((2,), 3.0)), f"reduce {t}")
    parts = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(parts, torch.full((2,), float(rank)))
    check(all(torch.equal(p, torch.full((2,), float(r))) for r, p in enumerate(parts)), "all_gather")
    flat = torch.zeros(2 * size)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank)))
    check(torch.equal(flat, torch.tensor([0.0, 0.0, 1.0, 1.0])), f"all_gather_into_tensor {flat}")
    gathered = [torch.zeros(1) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.full((1,), float(rank + 10)), gathered, dst=0)
    if rank == 0:
        check([g.item() for g in gathered] == [10.0, 11.0], f"gather {gathered}")
    out = torch.zeros(2)
    dist.scatter(out, [torch.full((2,), float(r + 20)) for r in range(size)] if rank == 0 else None,
                 src=0)
    check(torch.equal(out, torch.full((2,), float(rank + 20))), f"scatter {out}")
    out = torch.zeros(2)
    dist.reduce_scatter(out, [torch.full((2,), float(r + 1)) for r in range(size)])
    check(torch.equal(out, torch.full((2,), 2.0 * (rank + 1))), f"reduce_scatter {out}")
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.arange(4, dtype=torch.float32))
    check(torch.equal(out, 2 * torch.arange(4, dtype=torch.float32)[2 * rank:2 * rank + 2]),
          f"reduce_scatter_tensor {out}")
    outs = [torch.zeros(1) for _ in range(size)]
    dist.all_to_all(outs, [torch.full((1,), float(10 * rank + r)) for r in range(size)])
    check([o.item() for o in outs] == [float(10 * r + rank) for r in range(size)], f"all_to_all {outs}")
    # Uneven all_to_all_single: rank r sends r + 1 rows to each peer.
    inp = torch.full((size * (rank + 1),), float(rank))
    out = torch.zeros(sum(r + 1 for r in range(size)))
    dist.all_to_all_single(out, inp, output_split_sizes=[r + 1 for r in range(size)],
                           input_split_sizes=[rank + 1] * size)
    check(torch.equal(out, torch.tensor([0.0, 1.0, 1.0])), f"all_to_all_single {out}")
    ts = [torch.ones(2), torch.ones(3)]
    dist.all_reduce_coalesced(ts)
    check(all(torch.equal(x, torch.full_like(x, 2.0)) for x in ts), "all_reduce_coalesced")
    dist.barrier()
    # Point-to-point, blocking, nonblocking, any source, batched.
    if rank == 0:
        dist.send(torch.arange(3.0), 1, tag=4)
        w = dist.isend(torch.arange(3.0) * 2, 1)
        w.wait()
        dist.send(torch.ones(1) * 7, 1, tag=9)
    else:
        r = torch.zeros(3)
        dist.recv(r, 0, tag=4)
        check(torch.equal(r, torch.arange(3.0)), f"recv {r}")
        w = dist.irecv(r, 0)
        w.wait()
        check(torch.equal(r, torch.arange(3.0) * 2), f"irecv {r}")
        any_source = torch.zeros(1)
        sender = dist.recv(any_source, tag=9)
        check(sender == 0 and any_source.item() == 7.0, f"recv any source {sender} {any_source}")
    peer = 1 - rank
    got = torch.zeros(2)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((2,), float(rank)), peer),
                                    dist.P2POp(dist.irecv, got, peer)])
    for w in works:
        w.wait()
    check(torch.equal(got, torch.full((2,), float(peer))), f"batch_isend_irecv {got}")


def work_api(rank, size):
    t = torch.ones(8)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    check(work.wait(), "wait() returned False")
    check(work.is_completed() and work.is_success(), "is_completed after wait")
    check(torch.equal(fut.value()[0], torch.full((8,), 2.0)), f"future value {fut.value()}")
    check(torch.equal(work.result()[0], torch.full((8,), 2.0)), "result()")
    chained = dist.all_reduce(torch.ones(2), async_op=True).get_future().then(
        lambda f: f.value()[0] * 10)
    check(torch.equal(chained.wait(), torch.full((2,), 20.0)), "future.then")
    group = dist.new_group([0, 1])
    t = torch.ones(1)
    dist.all_reduce(t, group=group)
    check(t.item() == 2.0, f"new_group all_reduce {t}")
    if rank == 1:
        r = torch.zeros(1)
        work = dist.irecv(r, 0, tag=77)
        start = time.monotonic()
        try:
            work.wait(datetime.timedelta(milliseconds=300))
            raise AssertionError("a receive nobody sends completed")
        except RuntimeError as error:
            check(time.monotonic() - start < 5, "wait(timeout) did not return in time")
            print(f"rank 1: receive timed out as asked: {str(error)[:160]}")
        dist.send(torch.ones(1), 0, tag=78)
        work.wait()  # the late send below completes it
        check(r.item() == 5.0 and work.source_rank() == 0, f"late receive {r}")
    else:
        dist.recv(torch.zeros(1), 1, tag=78)
        dist.send(torch.full((1,), 5.0), 1, tag=77)


def errors(rank, size):
    # Refused before anything is sent: the group stays usable.
    try:
        dist.all_reduce(torch.ones(2).to_sparse())
        raise AssertionError("a sparse all_reduce succeeded")
    except RuntimeError as error:
        check("c10d backend" in str(error) and "Sparse" in str(error), f"message: {error}")
    dist.barrier()
    # Found on the wire: both ranks learn what the other sent. The group is failed afterwards
    # (as torch's gloo is), so this comes last.
    try:
        dist.all_reduce(torch.ones(3 + rank))
        raise AssertionError("all_reduce of different sizes succeeded")
    except RuntimeError as error:
        check("rank" in str(error) and "allreduce" in str(error), f"message: {error}")
        print(f"rank {rank}: shape mismatch: {str(error)[:200]}")
    sys.exit(0)


def peer_dies(rank, size):
    if rank == 1:
        dist.barrier()
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    start = time.monotonic()
    try:
        for _ in range(100):
            dist.all_reduce(torch.ones(1024))
        raise AssertionError("all_reduce with a dead peer succeeded")
    except RuntimeError as error:
        print(f"rank 0: peer killed, all_reduce failed after {time.monotonic() - start:.2f} s: "
              f"{str(error)[:200]}")
        check(time.monotonic() - start < 25, "the failure took longer than the timeout")
    sys.exit(0)


def rank_main(case, scratch):
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init(case, rank, size, scratch)
    body = {"ops": every_op, "work": work_api, "errors": errors, "peer_dies": peer_dies}.get(case)
    (body or every_op)(rank, size)
    dist.barrier()
    dist.destroy_process_group()


def run(case):
    with tempfile.TemporaryDirectory() as scratch:
        codes = run_ranks([__file__, "--rank", case, scratch], 2, timeout=90)
    expected = [0, -signal.SIGKILL] if case == "peer_dies" else [0, 0]
    ok = codes == expected
    print(f"{case}: {'ok' if ok else f'FAILED (exit codes {codes}, expected {expected})'}",
          flush=True)
    return ok


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2], sys.argv[3])
        return 0
    cases = ["env", "tcp", "file", "tcpstore", "filestore", "prefixstore", "ops", "work",
             "errors", "peer_dies"]
    results = [run(case) for case in cases]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
