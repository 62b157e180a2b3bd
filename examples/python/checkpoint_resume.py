#!/usr/bin/env python3
"""Training that saves and resumes at any world size, from Python: ZeRO-2 with Adam written with
c10d's collectives on NumPy arrays (gradients reduce-scattered, each rank stepping its shard of
the flat parameters, the shards all-gathered), checkpointed with c10d.checkpoint: the parameters
whole, Adam's moments as flat shards (c10d.checkpoint.Shard), the sampler's place, every rank's
generator and the step.

    c10drun --nproc-per-node 4 python3 checkpoint_resume.py --root ckpt --steps 20 --save-at 10
    c10drun --nproc-per-node 4 python3 checkpoint_resume.py --root ckpt --steps 20 --resume
    c10drun --nproc-per-node 3 python3 checkpoint_resume.py --root ckpt --steps 20 --resume

Rank 0 prints "step N loss L" and, at the end, "parameters <sha256 prefix>": the second run
prints the first one's.
"""
import argparse
import hashlib
import pickle

import numpy as np

import c10d as dist
import c10d.checkpoint as dcp

IN, OUT, SAMPLES, BATCH, KEEP = 16, 8, 512, 8, 0.9
LR, BETA1, BETA2, EPS = 0.05, 0.9, 0.999, 1e-8


def dataset():
    g = np.random.default_rng(2024)
    w, b = g.uniform(-1, 1, (IN, OUT)), g.uniform(-1, 1, OUT)
    x = g.uniform(-1, 1, (SAMPLES, IN)).astype(np.float32)
    return x, (x @ w + b).astype(np.float32)


def epoch_order(epoch):
    return np.random.default_rng(7 + epoch).permutation(SAMPLES)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default="checkpoints")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--save-at", type=int, default=-1)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    x, y = dataset()
    n = IN * OUT + OUT
    params = np.zeros(n, dtype=np.float32)  # w then b, flat
    part = -(-n // ranks)
    begin = min(n, rank * part)
    count = min(n, begin + part) - begin
    exp_avg = np.zeros(part, dtype=np.float32)
    exp_avg_sq = np.zeros(part, dtype=np.float32)
    rng = np.random.default_rng(1000 + rank)

    def state(step, epoch, consumed):
        return {"model": {"params": params},
                "optim": {"exp_avg": dcp.Shard(exp_avg[:count], (n,), flat_offset=begin),
                          "exp_avg_sq": dcp.Shard(exp_avg_sq[:count], (n,), flat_offset=begin),
                          "step": step},
                "sampler": {"epoch": epoch, "consumed": consumed},
                "step": step}

    step, epoch, consumed = 0, 0, 0
    if args.resume:
        latest = dcp.latest(args.root)
        s = state(0, 0, 0)
        dcp.load(s, latest)
        step, epoch, consumed = s["step"], s["sampler"]["epoch"], s["sampler"]["consumed"]
        # This rank's generator, if the saving job had this rank (strict=False: else it starts
        # from its seed); its state is bytes of our own pickle, so no allow_pickle is needed.
        mine = {"rng": {f"rank{rank}": b""}}
        dcp.load(mine, latest, strict=False)
        if mine["rng"][f"rank{rank}"]:
            rng.bit_generator.state = pickle.loads(mine["rng"][f"rank{rank}"])
        if rank == 0:
            print(f"resumed from {latest} at step {step} on {ranks} ranks", flush=True)

    adam_step = step
    grad = np.zeros(part * ranks, dtype=np.float32)
    mine = np.zeros(part, dtype=np.float32)
    gathered = np.zeros(part * ranks, dtype=np.float32)
    loss = None
    while step < args.steps:
        step += 1
        order = epoch_order(epoch)[consumed:]
        if len(order) < BATCH * ranks:  # the epoch's end
            epoch, consumed = epoch + 1, 0
            order = epoch_order(epoch)
        batch = order[rank:BATCH * ranks:ranks]
        consumed += BATCH * ranks
        w, b = params[:IN * OUT].reshape(IN, OUT), params[IN * OUT:]
        error = x[batch] @ w + b - y[batch]
        kept = (rng.uniform(size=BATCH) < KEEP).astype(np.float32)[:, None]
        d = 2 * error * kept / (BATCH * OUT)
        grad[:n] = np.concatenate([(x[batch].T @ d).ravel(), d.sum(0)])
        dist.reduce_scatter_tensor(mine, grad, op=dist.ReduceOp.AVG)
        adam_step += 1
        exp_avg[:] = BETA1 * exp_avg + (1 - BETA1) * mine
        exp_avg_sq[:] = BETA2 * exp_avg_sq + (1 - BETA2) * mine * mine
        m_hat = exp_avg / (1 - BETA1 ** adam_step)
        v_hat = exp_avg_sq / (1 - BETA2 ** adam_step)
        shard = np.zeros(part, dtype=np.float32)
        shard[:count] = params[begin:begin + count] - LR * m_hat[:count] / (np.sqrt(v_hat[:count]) + EPS)
        dist.all_gather_into_tensor(gathered, shard)
        params[:] = gathered[:n]
        total = np.array([float((error ** 2).mean())], dtype=np.float32)
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        loss = float(total[0])
        if rank == 0:
            print(f"step {step} loss {loss:.6f}", flush=True)
        if step == args.save_at:
            s = state(step, epoch, consumed)
            s["rng"] = {f"rank{rank}": pickle.dumps(rng.bit_generator.state)}
            dcp.save(s, f"{args.root}/step-{step}", overwrite=True)
            if rank == 0:
                print(f"saved {args.root}/step-{step}", flush=True)
    digest = hashlib.sha256(params.tobytes()).hexdigest()[:16]
    print(f"rank {rank} parameters {digest}", flush=True)
    dist.destroy_process_group()
    return 0 if loss is not None and np.isfinite(loss) else 1


if __name__ == "__main__":
    raise SystemExit(main())
