"""c10d: torch.distributed's API over the c10d library (libc10d_c), without PyTorch.

    import c10d as dist
    dist.init_process_group("gloo")
    dist.all_reduce(array)  # numpy.ndarray, torch.Tensor, __dlpack__ objects, buffers

c10d.rpc is torch.distributed.rpc's calls by name (init_rpc, rpc_sync, rpc_async, remote);
c10d.parallel has the gradient Reducer and DistributedDataParallel for torch modules.

The package is pure Python over the C API (ctypes). It finds libc10d_c through
C10D_C_LIBRARY when that is set, else where the build or install put it (_library.py).
"""

from .distributed import (Backend, GroupMember, P2POp, ProcessGroup, ReduceOp, Work,
                          _make_nccl_premul_sum, all_gather, all_gather_into_tensor, all_reduce,
                          all_to_all, all_to_all_single, barrier, batch_isend_irecv, broadcast,
                          default_pg_timeout, destroy_process_group, gather, get_backend,
                          get_global_rank, get_group_rank, get_process_group_ranks, get_rank,
                          get_world_size, group, init_process_group, irecv, is_available,
                          is_initialized, isend, monitored_barrier, new_group, new_subgroups,
                          new_subgroups_by_enumeration, premul_sum, recv,
                          reduce, reduce_op, reduce_scatter, reduce_scatter_tensor, scatter, send)
from .errors import (BackendError, CheckpointError, DistBackendError, DistError, DistQueueEmptyError,
                     DistStoreError, Error,
                     InvalidArgument, RemoteError, StateError, StoreError, TimeoutError)
from .distributed import _coalescing_manager
from .objects import (all_gather_object, broadcast_object_list, gather_object,
                      recv_object_list, scatter_object_list, send_object_list)
from .device_mesh import DeviceMesh, init_device_mesh
from .errorfile import record, write_error_file
from .store import FileStore, HashStore, PrefixStore, Store, TCPStore
from . import checkpoint, elastic, multiprocessing, parallel, rpc
from .parallel import Reducer

__all__ = [
    "Backend", "DeviceMesh", "GroupMember", "P2POp", "ProcessGroup", "ReduceOp", "Work",
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all",
    "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast", "broadcast_object_list",
    "default_pg_timeout", "destroy_process_group", "gather", "gather_object", "get_backend",
    "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank", "get_world_size",
    "group", "init_device_mesh", "init_process_group", "irecv", "is_available", "is_initialized",
    "isend",
    "monitored_barrier", "new_group", "new_subgroups", "new_subgroups_by_enumeration",
    "premul_sum", "recv", "recv_object_list", "reduce", "reduce_op", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "scatter_object_list", "send", "send_object_list",
    "BackendError", "CheckpointError", "DistBackendError", "DistError", "DistQueueEmptyError",
    "DistStoreError", "Error", "InvalidArgument",
    "RemoteError", "StateError", "StoreError", "TimeoutError",
    "FileStore", "HashStore", "PrefixStore", "Store", "TCPStore",
    "Reducer", "checkpoint", "elastic", "multiprocessing", "parallel", "rpc", "record", "write_error_file",
    "_make_nccl_premul_sum", "_coalescing_manager",
]
