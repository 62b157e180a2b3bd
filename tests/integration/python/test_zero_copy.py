"""Zero copy: the address c10d passes to C is the caller's memory, and results land there."""

import array
import ctypes

import numpy as np
import pytest
import torch

import c10d
import world
from c10d import _tensors


class DLPackOnly:
    """Exposes an array through DLPack alone (no buffer protocol, no __array_interface__)."""

    def __init__(self, array_):
        self._array = array_

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def address_of_buffer(obj):
    return ctypes.addressof(ctypes.c_char.from_buffer(obj))


@pytest.fixture
def solo_group():
    """A default group of one rank, in this process."""
    c10d.init_process_group(store=c10d.HashStore(), rank=0, world_size=1)
    yield
    c10d.destroy_process_group()


def test_the_address_handed_to_c_is_the_callers():
    a = np.arange(8, dtype=np.float64)
    t = torch.arange(8, dtype=torch.int32)
    raw = bytearray(16)
    floats = array.array("f", [1.0, 2.0])
    cases = [(a, a.ctypes.data), (a[2:6], a[2:].ctypes.data), (t, t.data_ptr()),
             (t[3:], t.data_ptr() + 12), (raw, address_of_buffer(raw)),
             (floats, floats.buffer_info()[0]), (memoryview(raw)[4:], address_of_buffer(raw) + 4),
             (DLPackOnly(a), a.ctypes.data)]
    for obj, address in cases:
        buf = _tensors.buffer(obj, "tensor", True)
        assert buf.data == address, type(obj)
    listed = _tensors.buffers([a, t, DLPackOnly(a[1:])], "tensor_list", True)
    assert [b.data for b in listed] == [a.ctypes.data, t.data_ptr(), a[1:].ctypes.data]


def test_dtypes_and_counts():
    expected = {np.float32: c10d._capi.FLOAT32, np.float64: c10d._capi.FLOAT64,
                np.float16: c10d._capi.FLOAT16, np.int8: c10d._capi.INT8,
                np.int16: c10d._capi.INT16, np.int32: c10d._capi.INT32,
                np.int64: c10d._capi.INT64, np.uint8: c10d._capi.UINT8, np.bool_: c10d._capi.BOOL}
    for dtype, code in expected.items():
        objs = [np.zeros((2, 3), dtype), torch.from_numpy(np.zeros((2, 3), dtype)),
                memoryview(np.zeros((2, 3), dtype))]
        if dtype is not np.bool_:  # numpy exports no bool through DLPack
            objs.append(DLPackOnly(np.zeros((2, 3), dtype)))
        for obj in objs:
            buf = _tensors.buffer(obj, "t", False)
            assert (buf.dtype, buf.count) == (code, 6), (dtype, type(obj))
    assert _tensors.buffer(torch.zeros(3, dtype=torch.bfloat16), "t", False).dtype == \
        c10d._capi.BFLOAT16
    assert _tensors.buffer(array.array("q", [1, 2]), "t", False).dtype == c10d._capi.INT64


def test_results_land_in_place(solo_group):
    base = np.zeros(10, np.float32)
    inner = base[2:6]
    inner[:] = [1, 2, 3, 4]
    c10d.all_reduce(inner, op=c10d.premul_sum(3.0))
    np.testing.assert_array_equal(base, [0, 0, 3, 6, 9, 12, 0, 0, 0, 0])

    t = torch.ones(4)
    view = t[1:3]
    c10d.all_reduce(view, op=c10d.premul_sum(2.0))
    assert t.tolist() == [1, 2, 2, 1]

    held = np.array([1.0, 2.0, 3.0])
    c10d.all_reduce(DLPackOnly(held), op=c10d.premul_sum(10.0))
    np.testing.assert_array_equal(held, [10, 20, 30])

    raw = bytearray(b"\x01\x02\x03")
    c10d.all_reduce(raw, op=c10d.ReduceOp.PREMUL_SUM)  # factor 1: unchanged, in place
    c10d.all_reduce(memoryview(raw)[1:], op=c10d.premul_sum(2))
    assert raw == bytearray(b"\x01\x04\x06")

    out = np.full(6, -1.0)
    c10d.all_gather_into_tensor(out[2:4], np.array([7.0, 8.0]))
    np.testing.assert_array_equal(out, [-1, -1, 7, 8, -1, -1])
    out_list = [np.zeros(2)]
    c10d.all_gather(out_list, np.array([5.0, 6.0]))
    np.testing.assert_array_equal(out_list[0], [5, 6])


def run_work_keeps_memory(rank, size):
    import gc
    import time

    import c10d as dist
    from c10d import distributed
    if rank == 0:
        # Only the Work holds the DLPack wrapper (and its capsule) and the array behind it.
        work = dist.irecv(DLPackOnly(np.zeros(4)), 1)
        dist.barrier()
        work.wait()
        # A Work dropped before completion is parked, not freed, and freed once complete.
        target = np.zeros(4)
        dist.irecv(target, 1, tag=5)  # its Work is garbage at once
        gc.collect()
        assert len(distributed._orphans) == 1
        dist.barrier()
        dist.barrier()
        np.testing.assert_array_equal(target, [5, 5, 5, 5])
        # The data lands a moment before the work counts as completed.
        handle, done = distributed._orphans[0][0], ctypes.c_int()
        deadline = time.monotonic() + 10
        while not done.value and time.monotonic() < deadline:
            time.sleep(0.01)
            c10d._capi.lib.c10d_work_is_completed(handle, ctypes.byref(done))
        dist.all_reduce(np.zeros(1), async_op=True).wait()  # a new Work reaps the orphans
        assert not distributed._orphans
    else:
        dist.barrier()
        dist.send(np.arange(4.0), 0)
        dist.barrier()
        dist.send(np.full(4, 5.0), 0, tag=5)
        dist.barrier()
        dist.all_reduce(np.zeros(1), async_op=True).wait()


def test_work_keeps_memory_alive():
    world.run(run_work_keeps_memory, 2)
