"""c10d.elastic over the C API: a reform asked with a wrong c10d_reformation fails before any
rank changes, and the group re-forms right after it."""

from ctypes import byref
from datetime import timedelta

import numpy as np
import pytest

import world


def run_wrong_struct(rank, size):
    import c10d
    from c10d import _capi, elastic

    group = elastic.ElasticGroup(timeout=timedelta(seconds=30))
    assert (group.generation, group.members()) == (0, [0, 1])
    raw = _capi.Reformation(struct_size=3)
    with pytest.raises(c10d.InvalidArgument, match=r"c10d_elastic_reform: out->struct_size is 3"):
        _capi.check(elastic.lib.c10d_elastic_reform(group._handle, None, byref(raw)))
    assert group.generation == 0, "the refused call re-formed the group"
    # Every rank refused alike and none waits in a reform: the next one forms generation 1.
    change = group.reform()
    assert (change.generation, group.members()) == (1, [0, 1])
    # The new generation works, and rank 0 (the store's host) leaves after rank 1 is done.
    total = np.ones(1, np.float32)
    c10d.all_reduce(total, group=group.process_group)
    assert total[0] == 2.0
    c10d.barrier(group=group.process_group)
    return change.generation


def test_a_wrong_reformation_struct_fails_before_the_reform():
    assert world.run(run_wrong_struct, 2, init=False) == [1, 1]
