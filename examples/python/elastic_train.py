#!/usr/bin/env python3
"""Data-parallel training that keeps going when ranks die, from Python (c10d.elastic):

    c10drun --elastic --nproc-per-node 4 python3 elastic_train.py [--steps 300] [--step-ms 5]
    c10drun --max-restarts 3 --nproc-per-node 4 python3 elastic_train.py   # dead ranks come back

The same program as examples/elastic_train.cpp, with NumPy: linear regression, a fixed global
batch per step split over the members, one allreduce of the gradients, the update applied only
when every member's step committed; after a kill the survivors re-form and redo the step, and a
restarted rank joins at a step boundary and receives the parameters. Each rank prints its pid at
the start and, at the end, the step reached and a hash of its parameters. With --count-samples,
each sample's uses in committed steps are counted in the replicated state and checked at the end
(exactly once per epoch).
"""
import argparse
import os
import sys
import time

import numpy as np

import c10d

FEATURES, SAMPLES, BATCH, LR = 16, 960, 48, 0.05
STEPS_PER_EPOCH = (SAMPLES + BATCH - 1) // BATCH
TRUE_W = np.array([j % 5 - 2 for j in range(FEATURES)], dtype=np.float32)


def features(samples):
    """Sample i's features, from a hash of (i, j), the same on every rank."""
    i = np.asarray(samples, dtype=np.uint32)[:, None]
    j = np.arange(FEATURES, dtype=np.uint32)[None, :]
    h = (i * np.uint32(2654435761)) ^ (j * np.uint32(40503))
    h ^= h >> np.uint32(13)
    h *= np.uint32(0x5bd1e995)
    h ^= h >> np.uint32(15)
    return (h % 2001).astype(np.float32) / 1000.0 - 1.0


def loss(w):
    x = features(range(1024))
    return float(np.mean((x @ w - x @ TRUE_W) ** 2))


def fnv(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--step-ms", type=int, default=5)
    parser.add_argument("--min-size", type=int, default=1)
    parser.add_argument("--count-samples", action="store_true")
    args = parser.parse_args()
    group = c10d.elastic.ElasticGroup(min_size=args.min_size)
    print(f"start id {group.id} pid {os.getpid()}", flush=True)
    w = np.zeros(FEATURES, dtype=np.float32)
    uses = np.zeros(SAMPLES, dtype=np.float32)  # --count-samples: committed uses of each sample
    state = {"w": w, "uses": uses} if args.count_samples else {"w": w}
    before = loss(w)
    if group.incarnation > 0:
        r = group.join(state)
        print(f"id {group.id} (restarted) joined generation {r.generation} at step {r.step} in "
              f"{r.seconds:.3f} s", flush=True)
    while group.step < args.steps:
        step = group.step
        # The gradient, then how often this step used each sample.
        gradient = np.zeros(FEATURES + SAMPLES, dtype=np.float32)
        ok = True
        try:
            pg = group.process_group
            rank, size = pg.rank(), pg.size()
            # Window step of the epoch's order, split by rank: each sample once, on one member.
            order = np.random.default_rng(17 + step // STEPS_PER_EPOCH).permutation(SAMPLES)
            first = (step % STEPS_PER_EPOCH) * BATCH
            samples = order[first + rank:min(first + BATCH, SAMPLES):size]
            x = features(samples)
            error = x @ w - x @ TRUE_W
            gradient[:FEATURES] = 2 * (error[:, None] * x).sum(axis=0)
            np.add.at(gradient[FEATURES:], samples, 1.0)
            time.sleep(args.step_ms / 1000)  # the model's compute
            c10d.all_reduce(gradient, group=pg)
        except c10d.Error:
            ok = False  # a lost rank: every survivor fails this step and re-forms
        if group.commit(ok):
            w -= LR * gradient[:FEATURES] / BATCH
            uses += gradient[FEATURES:]
            if not group.joins_pending:
                continue
        r = group.reform(state)
        ids = lambda values: ",".join(map(str, values))  # noqa: E731
        print(f"id {group.id}: generation {r.generation} without [{ids(r.lost)}] with "
              f"[{ids(r.joined)}]: members [{ids(r.members)}] at step {r.step}"
              f"{' (healed)' if r.healed else ''}, re-formed in {r.seconds:.3f} s", flush=True)
    after = loss(w)
    if args.count_samples:
        epochs = args.steps // STEPS_PER_EPOCH
        wrong = int(np.count_nonzero(uses != epochs))
        print(f"id {group.id}: {'exactly once per epoch' if wrong == 0 else 'NOT exactly once'}: "
              f"{wrong} of {SAMPLES} samples used other than {epochs} times in committed steps",
              flush=True)
        if wrong or args.steps % STEPS_PER_EPOCH:
            return 1
    print(f"done id {group.id} pid {os.getpid()} generation {group.generation} size "
          f"{group.size()} step {group.step} loss {before:.6f} -> {after:.6f} hash "
          f"{fnv(w.tobytes()):016x}", flush=True)
    return 0 if after < before else 1


if __name__ == "__main__":
    sys.exit(main())
