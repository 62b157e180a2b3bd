"""c10d's collectives under torch.distributed: importing this module registers the backend.

    import torch.distributed as dist
    import c10d.torch
    dist.init_process_group(backend=c10d.torch.BACKEND)   # "c10d"

Everything built on torch.distributed then runs on c10d: DistributedDataParallel and its comm
hooks, ZeroRedundancyOptimizer, torch.distributed.algorithms, new_group subgroups. The backend
rendezvouses through torch's own store (env://, tcp://, file://, a store you pass, torchrun's
agent), so nothing else about the program changes. Which of c10d's backends serves the tensors
follows C10D_BACKEND ("gloo" by default, "cpu:gloo,cuda:nccl" for GPUs). docs/torch.md has the
details and what differs from torch's gloo.
"""

import atexit as _atexit

import torch.distributed as _dist

try:
    from ._torch_backend import BACKEND_NAME as _BACKEND_NAME, ProcessGroupC10d
    from ._torch_backend import _drain_completions
except ImportError as error:  # built without torch, or against another torch
    raise ImportError(
        "c10d.torch needs c10d's torch extension (_torch_backend), which was not built or does "
        "not load: build c10d with Debian's libtorch-dev, python3-torch and pybind11-dev "
        f"(tools/setup.sh) and use the same torch ({error})") from error

BACKEND = _BACKEND_NAME

__all__ = ["BACKEND", "ProcessGroupC10d"]


def _create(options, pg_options=None):
    # torch names groups identically on every rank ("0", "1", ... or new_group's name), so the
    # name keeps our group's keys apart from other groups' in the shared store.
    return ProcessGroupC10d(options.store, options.group_rank, options.group_size,
                            options.timeout, name=f"torch:{options.group_id or 'default'}")


# A torch Future's callbacks (Python, for PowerSGD's hook) may still run on our completion
# threads when the program ends: finishing them before the interpreter finalizes keeps Python from
# ending those threads mid-callback, which aborts the process.
_atexit.register(_drain_completions, 10.0)

if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, _create, extended_api=True)


def _main(argv):
    # python3 -m c10d.torch program.py [args]: runs a torch.distributed program unchanged but for
    # its backend string, with the backend registered first (under torchrun, c10drun or srun).
    import os
    import runpy
    import sys

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python3 -m c10d.torch program.py [args...]\n"
              "Runs program.py with the 'c10d' torch.distributed backend registered.",
              file=sys.stderr if not argv else sys.stdout)
        return 0 if argv else 2
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python3 program.py` would
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    import sys as _sys

    _sys.exit(_main(_sys.argv[1:]))
