"""Runs PyTorch's own distributed test suite (torch.testing._internal.distributed.
distributed_test, as shipped by Debian's python3-torch) against one backend and writes each
test's outcome as JSON: {"test_name": {"outcome": "pass|fail|skip", "reason": ..., "seconds": ...}}.

    run_distributed_suite.py --backend gloo|c10d|c10d-as-gloo --out F.json [--world-size 2]
                             [-k SUBSTRING ...]

--backend c10d imports c10d.torch (which registers it) and declares the features the suite asks
a plugin about: DDP, subgroups. Many of the suite's tests are reserved for BACKEND == "gloo" by
name; --backend c10d-as-gloo runs the suite as for gloo, but every group torch would make with
its ProcessGroupGloo is c10d's instead, so those tests run on our code too. Tests run as torch runs them (one process per rank, a file://
rendezvous per test), except that ranks are forked rather than spawned: the same code, 10x less
start-up per test on a 2-core machine.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("-k", dest="patterns", action="append", default=[],
                        help="run only tests whose name contains this (repeatable)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    args = parser.parse_args()
    return args


# Parsed before torch's test utilities, which parse sys.argv themselves.
ARGS = parse_args() if __name__ == "__main__" else None
AS_GLOO = ARGS is not None and ARGS.backend == "c10d-as-gloo"
if ARGS is not None:
    os.environ["BACKEND"] = "gloo" if AS_GLOO else ARGS.backend
    os.environ["WORLD_SIZE"] = str(ARGS.world_size)
    os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="c10d-torch-suite-"))
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(ARGS.timeout)
    sys.argv = sys.argv[:1]

sys.path.insert(0, HERE)  # the expecttest stand-in

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.parallel._replicated_tensor_ddp_utils as replicated  # noqa: E402

# On Python 3.11 turning ReplicatedTensor on imports torch.distributed._shard, which fails in
# Debian's build; torch's own runs leave it off too (it only changes DDP's internal bookkeeping).
replicated._set_ddp_with_replicated_tensor = lambda value: None

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
from torch.testing._internal.distributed import distributed_test  # noqa: E402

BACKEND = os.environ["BACKEND"]
if BACKEND not in ("gloo", "nccl", "mpi", "ucc"):
    import c10d.torch  # noqa: F401,E402  (registers the backend)

    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add(BACKEND)
    # The suite checks the profiler's "<backend>:all_reduce" events only for the backends it
    # lists; ours labels its ops the same way.
    distributed_test.PROFILING_SUPPORTED_BACKENDS.append(BACKEND)
    distributed_test.SEND_RECV_PROFILING_SUPPORTED_BACKENDS.append(BACKEND)
if AS_GLOO:
    import torch.distributed.distributed_c10d as distributed_c10d  # noqa: E402
    from c10d.torch import ProcessGroupC10d  # noqa: E402

    _torch_gloo = distributed_c10d.ProcessGroupGloo
    _torch_wrapper = distributed_c10d._create_process_group_wrapper

    def _ours_instead_of_gloo(store, rank, size, timeout):
        return ProcessGroupC10d(store, rank, size, timeout, name="torch-as-gloo", profiler_name="gloo")

    def _wrapper_with_torch_gloo(*args, **kwargs):
        # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps a group with checks that run on a helper group,
        # which torch requires to be its own ProcessGroupGloo.
        distributed_c10d.ProcessGroupGloo = _torch_gloo
        try:
            return _torch_wrapper(*args, **kwargs)
        finally:
            distributed_c10d.ProcessGroupGloo = _ours_instead_of_gloo

    distributed_c10d.ProcessGroupGloo = _ours_instead_of_gloo
    distributed_c10d._create_process_group_wrapper = _wrapper_with_torch_gloo


class TestDistBackendWithFork(distributed_test.TestDistBackend,
                              distributed_test.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._start_processes(torch.multiprocessing.get_context("fork").Process)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


def shorten(text, keep=1500):
    # A failure's text is the ranks' tracebacks, C++ frames included: keep where it starts
    # (the error) and where it ends (the assertion).
    return text if len(text) <= 2 * keep else text[:keep] + "\n...\n" + text[-keep:]


class Recorder(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self._started = 0.0

    def _put(self, test, outcome, reason=""):
        name = test.id().split(".")[-1]
        self.outcomes[name] = {"outcome": outcome, "reason": shorten(reason.strip()),
                               "seconds": round(time.monotonic() - self._started, 2)}

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._put(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._put(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._put(test, "fail", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._put(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._put(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._put(test, "fail", "unexpected success")


def main():
    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(TestDistBackendWithFork)
    if ARGS.patterns:
        names = [n for n in names if any(p in n for p in ARGS.patterns)]
    suite = unittest.TestSuite(TestDistBackendWithFork(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=Recorder, verbosity=2, stream=sys.stdout)
    result = runner.run(suite)
    with open(ARGS.out, "w") as out:
        json.dump({"backend": ARGS.backend, "world_size": ARGS.world_size, "torch": torch.__version__,
                   "tests": result.outcomes}, out, indent=1, sort_keys=True)
    counts = {}
    for entry in result.outcomes.values():
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    print(f"{ARGS.backend}: {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
