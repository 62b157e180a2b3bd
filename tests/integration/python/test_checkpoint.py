"""c10d.checkpoint from Python: torch tensors, numpy arrays and __dlpack__ objects saved as
shards by 3 processes, loaded at 2 and 1 (in place, nested dicts, values), async_save overlapping
work, the errors a damaged checkpoint raises, and the folder helpers."""

import os
import tempfile

import numpy as np
import pytest

import world
from test_zero_copy import DLPackOnly


def rows_of(rank, size, total):
    part = (total + size - 1) // size
    first = min(total, rank * part)
    return first, min(total, first + part) - first


def global_w():
    return np.arange(10 * 6, dtype=np.float32).reshape(10, 6) * 0.5


def run_save(rank, size, root):
    import torch

    import c10d.checkpoint as dcp
    first, count = rows_of(rank, size, 10)
    state = {
        "model": {
            "w": dcp.Shard(global_w()[first:first + count].copy(), (10, 6), (first, 0)),
            "bias": torch.arange(4, dtype=torch.float64),  # replicated, torch
            "flat": dcp.Shard(torch.arange(rank * 5, rank * 5 + 5, dtype=torch.int64), (15,),
                              flat_offset=rank * 5),
        },
        "step": 10,
        "note": {"text": "resume me", "lr": 0.5},
    }
    dcp.save(state, os.path.join(root, "step-10"), layout="data=3")
    future = dcp.async_save(state, os.path.join(root, "step-11"))
    state["model"]["bias"] += 1  # after async_save returned: not in step-11
    future.result()
    assert future.done()


def run_load(rank, size, root):
    import torch

    import c10d.checkpoint as dcp
    first, count = rows_of(rank, size, 10)
    w = np.zeros((count, 6), dtype=np.float32)
    bias = torch.zeros(4, dtype=torch.float64)
    flat_first, flat_count = rows_of(rank, size, 15)
    flat = torch.zeros(flat_count, dtype=torch.int64)
    state = {"model": {"w": dcp.Shard(w, (10, 6), (first, 0)), "bias": bias,
                       "flat": dcp.Shard(flat, (15,), flat_offset=flat_first)},
             "step": 0, "note": {"text": "", "lr": 0.0}}
    dcp.load(state, checkpoint_id=dcp.latest(root))
    np.testing.assert_array_equal(w, global_w()[first:first + count])
    assert bias.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert flat.tolist() == list(range(flat_first, flat_first + flat_count))
    assert state["step"] == 10 and state["note"] == {"text": "resume me", "lr": 0.5}


def test_saved_by_three_loads_at_two_and_one():
    with tempfile.TemporaryDirectory() as root:
        world.run(run_save, 3, root)
        world.run(run_load, 2, root)
        run_load(0, 1, root)  # no process group: this process alone
        import c10d.checkpoint as dcp
        assert dcp.latest(root).endswith("step-11")
        assert dcp.verify(os.path.join(root, "step-10")) == []
        out = os.path.join(root, "whole.safetensors")
        dcp.consolidate(os.path.join(root, "step-10"), out)
        assert os.path.getsize(out) > 10 * 6 * 4
        assert dcp.keep_last(root, 1) is None
        assert sorted(os.listdir(root)) == ["step-11", "whole.safetensors"]


def test_dlpack_objects_save_and_load_in_place():
    import c10d.checkpoint as dcp
    with tempfile.TemporaryDirectory() as root:
        source = np.arange(24, dtype=np.int32).reshape(4, 6)
        dcp.save({"x": DLPackOnly(source)}, os.path.join(root, "c"))
        target = np.zeros((4, 6), dtype=np.int32)
        dcp.load({"x": DLPackOnly(target)}, os.path.join(root, "c"))
        np.testing.assert_array_equal(target, source)


def test_values_keep_their_types_and_pickles_need_consent():
    import c10d
    import c10d.checkpoint as dcp
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "v")
        dcp.save({"epoch": np.int64(3), "lr": 0.25, "name": "run-7", "raw": b"\x00\x01",
                  "flags": {"warm": True}, "t": np.zeros(2)}, path)
        back = {"epoch": 0, "lr": 0.0, "name": "", "raw": b"", "flags": {"warm": False},
                "t": np.zeros(2)}
        with pytest.raises(c10d.CheckpointError, match="value 'flags.warm' is a pickle"):
            dcp.load(back, path)
        dcp.load(back, path, allow_pickle=True)
        assert back == {"epoch": 3, "lr": 0.25, "name": "run-7", "raw": b"\x00\x01",
                        "flags": {"warm": True}, "t": back["t"]}
        assert type(back["epoch"]) is int
        with pytest.raises(c10d.InvalidArgument, match="1 offsets for a global shape of 2"):
            dcp.Shard(np.zeros((2, 2)), (4, 2), (0,))


def test_damage_and_mismatch_raise_checkpoint_errors():
    import c10d
    import c10d.checkpoint as dcp
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "c")
        a = np.arange(1000, dtype=np.float64)
        dcp.save({"a": a, "step": 1}, path)
        with pytest.raises(c10d.CheckpointError, match="exists already"):
            dcp.save({"a": a}, path)
        with pytest.raises(c10d.CheckpointError, match=r"'a' is float32\[1000\] in the program"):
            dcp.load({"a": np.zeros(1000, dtype=np.float32)}, path)
        with pytest.raises(c10d.CheckpointError, match="lacks tensor 'b'"):
            dcp.load({"a": np.zeros(1000), "b": np.zeros(1)}, path)
        target = np.zeros(1000)
        dcp.load({"a": target}, path, strict=False)
        np.testing.assert_array_equal(target, a)
        target[:] = 0
        dcp.load({"a": target}, path, strict=False, check_first=False)
        np.testing.assert_array_equal(target, a)
        data = os.path.join(path, "rank-00000.safetensors")
        with open(data, "r+b") as f:
            f.seek(-8, os.SEEK_END)
            f.write(b"\x01")
        target[:] = 0
        with pytest.raises(c10d.CheckpointError, match="do not match their checksum"):
            dcp.load({"a": target, "step": 0}, path)
        assert not target.any()  # nothing written by a failed load
        assert len(dcp.verify(path)) == 1
        with pytest.raises(c10d.CheckpointError, match="not a complete checkpoint"):
            dcp.load({"a": target}, os.path.join(root, "nowhere"))
        with pytest.raises(c10d.InvalidArgument, match="flat_offset"):
            dcp.Shard(target, (1000,))
