"""ctypes prototypes for libc10d_c (c10d/capi/c10d.h), its structs, and the status check.

Every function gets argtypes and restype once, here, so calls skip ctypes' argument guessing;
ctypes releases the GIL during each foreign call, so a blocking collective lets other Python
threads run.
"""

import ctypes
import os
from ctypes import (POINTER, Structure, byref, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_uint16, c_uint64, c_void_p)

from . import errors

API_VERSION = 5

# c10d_status
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_TIMEOUT = 2
ERR_STORE = 3
ERR_BACKEND = 4
ERR_REMOTE = 5
ERR_STATE = 6
ERR_INTERNAL = 7
ERR_CHECKPOINT = 8

# c10d_dtype
FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT8, INT16, INT32, INT64, UINT8, BOOL = range(10)

DEVICE_CPU = 0
DEVICE_CUDA = 1

P2P_SEND = 0
P2P_RECV = 1


class Buffer(Structure):
    """c10d_buffer. Converters may hang what must outlive the operation on it as `_keep`."""

    _fields_ = [
        ("data", c_void_p),
        ("count", c_int64),
        ("dtype", c_int),
        ("device_type", c_int),
        ("device_index", c_int),
        ("stream", c_void_p),
    ]


class Bytes(Structure):
    _fields_ = [("data", c_void_p), ("size", c_size_t)]


class TCPStoreOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("host", c_char_p),
        ("port", c_uint16),
        ("is_server", c_int),
        ("num_workers", c_int),
        ("timeout_ms", c_int64),
        ("wait_for_workers", c_int),
    ]


class InitOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_char_p),
        ("init_method", c_char_p),
        ("rank", c_int),
        ("world_size", c_int),
        ("timeout_ms", c_int64),
        ("group_name", c_char_p),
    ]


class GroupOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_char_p),
        ("timeout_ms", c_int64),
        ("group_name", c_char_p),
    ]


class OpOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("reduce_op", c_int),
        ("premul_factor", c_double),
        ("root", c_int),
        ("tag", c_int),
        ("timeout_ms", c_int64),
    ]


class P2POp(Structure):
    _fields_ = [("kind", c_int), ("buffer", Buffer), ("peer", c_int), ("tag", c_int)]


# The *_INIT macros of c10d.h, as constructors.
def tcp_store_options(**fields):
    base = dict(host=b"127.0.0.1", port=0, is_server=0, num_workers=-1, timeout_ms=300000,
                wait_for_workers=0)
    base.update(fields)
    return TCPStoreOptions(ctypes.sizeof(TCPStoreOptions), **base)


def init_options(**fields):
    base = dict(backend=None, init_method=None, rank=-1, world_size=-1, timeout_ms=0,
                group_name=None)
    base.update(fields)
    return InitOptions(ctypes.sizeof(InitOptions), **base)


def group_options(**fields):
    base = dict(backend=None, timeout_ms=0, group_name=None)
    base.update(fields)
    return GroupOptions(ctypes.sizeof(GroupOptions), **base)


def op_options(reduce_op=0, premul_factor=1.0, root=0, tag=0, timeout_ms=-1):
    return OpOptions(ctypes.sizeof(OpOptions), reduce_op, premul_factor, root, tag, timeout_ms)


def _load():
    path = os.environ.get("C10D_C_LIBRARY")
    if not path:
        try:
            from ._library import library_path
        except ImportError:
            raise ImportError("c10d cannot find libc10d_c: this copy of the package has no "
                              "_library.py (CMake generates it into the build tree's python/ "
                              "and the installed package); use one of those, or set "
                              "C10D_C_LIBRARY to the library's path") from None
        path = library_path()
    return ctypes.CDLL(path)


lib = _load()


def library_file():
    """The path of the libc10d_c this package loaded."""
    return lib._name

_store_p = c_void_p
_group_p = c_void_p
_work_p = c_void_p
_Buffer_p = POINTER(Buffer)
_OpOptions_p = POINTER(OpOptions)
_work_pp = POINTER(c_void_p)
_status = c_int
WorkCallback = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)


# ---- data-parallel reducer and RPC (parallel.py, rpc.py) ----

class DdpParameter(Structure):
    _fields_ = [("value", Buffer), ("grad", Buffer), ("name", c_char_p)]


class DdpOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("first_bucket_bytes", c_size_t),
        ("bucket_cap_bytes", c_size_t),
        ("find_unused_parameters", c_int),
        ("gradient_as_bucket_view", c_int),
        ("divide_by_initial_world_size", c_int),
        ("rebuild_buckets", c_int),
        ("hook", c_int),
    ]


def ddp_options(**fields):
    base = dict(first_bucket_bytes=1 << 20, bucket_cap_bytes=25 << 20, find_unused_parameters=0,
                gradient_as_bucket_view=0, divide_by_initial_world_size=0, rebuild_buckets=1,
                hook=0)
    base.update(fields)
    return DdpOptions(ctypes.sizeof(DdpOptions), **base)


# c10d_rpc_function: (user, request, reply) -> status. ctypes takes the GIL for each call.
RpcFunction = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)


class RpcFunctionEntry(Structure):
    _fields_ = [("name", c_char_p), ("function", RpcFunction), ("user", c_void_p)]


# c10d_rpc_async_function: (user, request, responder) -> status; c10d_rpc_callback: (user).
RpcAsyncFunction = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
RpcCallback = ctypes.CFUNCTYPE(None, c_void_p)


class RpcAsyncFunctionEntry(Structure):
    _fields_ = [("name", c_char_p), ("function", RpcAsyncFunction), ("user", c_void_p)]


class RpcOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("timeout_ms", c_int64),
        ("init_timeout_ms", c_int64),
        ("threads", c_int),
        ("async_functions", POINTER(RpcAsyncFunctionEntry)),
        ("num_async_functions", c_size_t),
    ]


def rpc_options(timeout_ms=60000, init_timeout_ms=60000, threads=4):
    return RpcOptions(ctypes.sizeof(RpcOptions), timeout_ms, init_timeout_ms, threads)


class CheckpointSaveOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("overwrite", c_int),
                ("checksum_block_bytes", c_int64), ("layout", c_char_p)]


class CheckpointLoadOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("allow_unexpected", c_int), ("allow_missing", c_int),
                ("check_first", c_int)]


_checkpoint_state_p = c_void_p
_checkpoint_saver_p = c_void_p
_elastic_p = c_void_p


class ElasticOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_char_p),
        ("timeout_ms", c_int64),
        ("group_name", c_char_p),
        ("min_size", c_int),
        ("join_timeout_ms", c_int64),
    ]


class Reformation(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("generation", c_uint64),
        ("step", c_int64),
        ("healed", c_int),
        ("num_lost", c_size_t),
        ("num_joined", c_size_t),
        ("seconds", c_double),
    ]
_ddp_p = c_void_p
_rpc_p = c_void_p
_future_p = c_void_p
_message_p = c_void_p

_PROTOTYPES = {
    # library
    "c10d_api_version": (c_int, []),
    "c10d_last_error": (c_char_p, []),
    "c10d_status_name": (c_char_p, [c_int]),
    "c10d_dtype_name": (c_char_p, [c_int]),
    "c10d_dtype_size": (c_size_t, [c_int]),
    "c10d_free": (None, [c_void_p]),
    "c10d_write_error_file": (_status, [c_char_p, POINTER(c_int)]),
    # checkpoints
    "c10d_checkpoint_state_new": (_status, [POINTER(_checkpoint_state_p)]),
    "c10d_checkpoint_state_free": (None, [_checkpoint_state_p]),
    "c10d_checkpoint_state_add": (_status, [_checkpoint_state_p, c_char_p, POINTER(Buffer),
                                            POINTER(c_int64), c_size_t, c_int, POINTER(c_int64),
                                            POINTER(c_int64)]),
    "c10d_checkpoint_state_set_value": (_status, [_checkpoint_state_p, c_char_p, c_char_p,
                                                  c_size_t]),
    "c10d_checkpoint_state_set_int": (_status, [_checkpoint_state_p, c_char_p, c_int64]),
    "c10d_checkpoint_state_get_int": (_status, [_checkpoint_state_p, c_char_p, POINTER(c_int64)]),
    "c10d_checkpoint_state_get_value": (_status, [_checkpoint_state_p, c_char_p, POINTER(Bytes),
                                                  POINTER(c_int)]),
    "c10d_checkpoint_save": (_status, [_checkpoint_state_p, c_char_p, _group_p,
                                       POINTER(CheckpointSaveOptions)]),
    "c10d_checkpoint_load": (_status, [_checkpoint_state_p, c_char_p, _group_p,
                                       POINTER(CheckpointLoadOptions)]),
    "c10d_checkpoint_saver_new": (_status, [_group_p, c_int, POINTER(_checkpoint_saver_p)]),
    "c10d_checkpoint_saver_save": (_status, [_checkpoint_saver_p, _checkpoint_state_p, c_char_p,
                                             POINTER(CheckpointSaveOptions)]),
    "c10d_checkpoint_saver_done": (_status, [_checkpoint_saver_p, POINTER(c_int)]),
    "c10d_checkpoint_saver_wait": (_status, [_checkpoint_saver_p]),
    "c10d_checkpoint_saver_free": (None, [_checkpoint_saver_p]),
    "c10d_checkpoint_latest": (_status, [c_char_p, POINTER(Bytes), POINTER(c_int)]),
    "c10d_checkpoint_keep_last": (_status, [c_char_p, c_size_t]),
    "c10d_checkpoint_verify": (_status, [c_char_p, POINTER(Bytes), POINTER(c_int)]),
    "c10d_checkpoint_consolidate": (_status, [c_char_p, c_char_p]),
    # recovery
    "c10d_elastic_from_env": (_status, [POINTER(ElasticOptions), POINTER(_elastic_p)]),
    "c10d_elastic_free": (None, [_elastic_p]),
    "c10d_elastic_group": (_status, [_elastic_p, POINTER(_group_p)]),
    "c10d_elastic_commit": (_status, [_elastic_p, c_int, POINTER(c_int)]),
    "c10d_elastic_joins_pending": (c_int, [_elastic_p]),
    "c10d_elastic_reform": (_status, [_elastic_p, _checkpoint_state_p, POINTER(Reformation)]),
    "c10d_elastic_join": (_status, [_elastic_p, _checkpoint_state_p, POINTER(Reformation)]),
    "c10d_elastic_members": (_status, [_elastic_p, POINTER(c_int), c_size_t, POINTER(c_size_t)]),
    "c10d_elastic_id": (c_int, [_elastic_p]),
    "c10d_elastic_step": (c_int64, [_elastic_p]),
    "c10d_elastic_generation": (c_uint64, [_elastic_p]),
    "c10d_elastic_incarnation": (c_int64, [_elastic_p]),
    # stores
    "c10d_store_tcp": (_status, [POINTER(TCPStoreOptions), POINTER(_store_p)]),
    "c10d_store_file": (_status, [c_char_p, c_int, c_int64, POINTER(_store_p)]),
    "c10d_store_hash": (_status, [POINTER(_store_p)]),
    "c10d_store_prefix": (_status, [c_char_p, _store_p, POINTER(_store_p)]),
    "c10d_store_port": (_status, [_store_p, POINTER(c_uint16)]),
    "c10d_store_set": (_status, [_store_p, c_char_p, c_char_p, c_size_t]),
    "c10d_store_get": (_status, [_store_p, c_char_p, c_int64, POINTER(Bytes)]),
    "c10d_store_add": (_status, [_store_p, c_char_p, c_int64, POINTER(c_int64)]),
    "c10d_store_compare_set": (_status, [_store_p, c_char_p, c_char_p, c_size_t, c_char_p,
                                         c_size_t, POINTER(Bytes)]),
    "c10d_store_wait": (_status, [_store_p, POINTER(c_char_p), c_size_t, c_int64]),
    "c10d_store_check": (_status, [_store_p, POINTER(c_char_p), c_size_t, POINTER(c_int)]),
    "c10d_store_delete": (_status, [_store_p, c_char_p, POINTER(c_int)]),
    "c10d_store_num_keys": (_status, [_store_p, POINTER(c_int64)]),
    "c10d_store_queue_push": (_status, [_store_p, c_char_p, c_char_p, c_size_t]),
    "c10d_store_queue_pop": (_status, [_store_p, c_char_p, c_int64, POINTER(Bytes),
                                       POINTER(c_int)]),
    "c10d_store_queue_len": (_status, [_store_p, c_char_p, POINTER(c_int64)]),
    "c10d_store_timeout": (_status, [_store_p, POINTER(c_int64)]),
    "c10d_store_set_timeout": (_status, [_store_p, c_int64]),
    "c10d_store_free": (None, [_store_p]),
    # process groups
    "c10d_store_connect": (_status, [POINTER(InitOptions), POINTER(_store_p)]),
    "c10d_group_init": (_status, [POINTER(InitOptions), POINTER(_group_p)]),
    "c10d_group_create": (_status, [_store_p, c_int, c_int, POINTER(GroupOptions),
                                    POINTER(_group_p)]),
    "c10d_group_new": (_status, [_group_p, POINTER(c_int), c_size_t, POINTER(GroupOptions),
                                 POINTER(_group_p)]),
    "c10d_group_split": (_status, [_group_p, c_int, c_int, POINTER(GroupOptions),
                                   POINTER(_group_p)]),
    "c10d_group_store": (_status, [_group_p, POINTER(_store_p)]),
    "c10d_group_rank": (c_int, [_group_p]),
    "c10d_group_size": (c_int, [_group_p]),
    "c10d_group_is_member": (c_int, [_group_p]),
    "c10d_group_backend": (c_char_p, [_group_p]),
    "c10d_group_shutdown": (_status, [_group_p]),
    "c10d_group_free": (None, [_group_p]),
    # operations
    "c10d_broadcast": (_status, [_group_p, _Buffer_p, _OpOptions_p, _work_pp]),
    "c10d_allreduce": (_status, [_group_p, _Buffer_p, _OpOptions_p, _work_pp]),
    "c10d_group_start_coalescing": (_status, [_group_p]),
    "c10d_group_end_coalescing": (_status, [_group_p, POINTER(_work_p)]),
    "c10d_allreduce_coalesced": (_status, [_group_p, _Buffer_p, c_size_t, _OpOptions_p,
                                           _work_pp]),
    "c10d_reduce": (_status, [_group_p, _Buffer_p, _OpOptions_p, _work_pp]),
    "c10d_allgather": (_status, [_group_p, _Buffer_p, c_size_t, _Buffer_p, _OpOptions_p,
                                 _work_pp]),
    "c10d_allgather_into_tensor": (_status, [_group_p, _Buffer_p, _Buffer_p, _OpOptions_p,
                                             _work_pp]),
    "c10d_gather": (_status, [_group_p, _Buffer_p, c_size_t, _Buffer_p, _OpOptions_p, _work_pp]),
    "c10d_scatter": (_status, [_group_p, _Buffer_p, _Buffer_p, c_size_t, _OpOptions_p,
                               _work_pp]),
    "c10d_reduce_scatter": (_status, [_group_p, _Buffer_p, _Buffer_p, c_size_t, _OpOptions_p,
                                      _work_pp]),
    "c10d_reduce_scatter_tensor": (_status, [_group_p, _Buffer_p, _Buffer_p, _OpOptions_p,
                                             _work_pp]),
    "c10d_alltoall": (_status, [_group_p, _Buffer_p, c_size_t, _Buffer_p, c_size_t,
                                _OpOptions_p, _work_pp]),
    "c10d_alltoall_base": (_status, [_group_p, _Buffer_p, _Buffer_p, POINTER(c_int64),
                                     POINTER(c_int64), c_size_t, _OpOptions_p, _work_pp]),
    "c10d_barrier": (_status, [_group_p, _OpOptions_p, _work_pp]),
    "c10d_monitored_barrier": (_status, [_group_p, c_int64, c_int]),
    "c10d_send": (_status, [_group_p, _Buffer_p, c_int, _OpOptions_p, _work_pp]),
    "c10d_recv": (_status, [_group_p, _Buffer_p, c_int, _OpOptions_p, _work_pp]),
    "c10d_recv_anysource": (_status, [_group_p, _Buffer_p, _OpOptions_p, _work_pp]),
    "c10d_batch_isend_irecv": (_status, [_group_p, POINTER(P2POp), c_size_t, c_int64,
                                         _work_pp]),
    # work
    "c10d_work_wait": (_status, [_work_p, c_int64]),
    "c10d_work_is_completed": (_status, [_work_p, POINTER(c_int)]),
    "c10d_work_source_rank": (_status, [_work_p, POINTER(c_int)]),
    "c10d_work_on_completion": (_status, [_work_p, WorkCallback, c_void_p]),
    "c10d_work_free": (None, [_work_p]),
    # DLPack
    "c10d_buffer_from_dlpack": (_status, [c_void_p, _Buffer_p]),
    "c10d_buffer_to_dlpack": (_status, [_Buffer_p, POINTER(c_void_p)]),
    # data-parallel reducer
    "c10d_ddp_create": (_status, [_group_p, POINTER(DdpParameter), c_size_t, POINTER(DdpOptions),
                                  POINTER(_ddp_p)]),
    "c10d_ddp_sync_parameters": (_status, [_ddp_p, _Buffer_p, c_size_t, c_int]),
    "c10d_ddp_prepare_for_backward": (_status, [_ddp_p, c_int]),
    "c10d_ddp_mark_grad_ready": (_status, [_ddp_p, c_size_t]),
    "c10d_ddp_finalize_backward": (_status, [_ddp_p, POINTER(c_int)]),
    "c10d_ddp_shadow_backward": (_status, [_ddp_p]),
    "c10d_ddp_set_no_sync": (_status, [_ddp_p, c_int]),
    "c10d_ddp_gradient": (_status, [_ddp_p, c_size_t, _Buffer_p]),
    "c10d_ddp_free": (None, [_ddp_p]),
    # RPC
    "c10d_rpc_message_new": (_status, [POINTER(_message_p)]),
    "c10d_rpc_message_free": (None, [_message_p]),
    "c10d_rpc_message_set_bytes": (_status, [_message_p, c_char_p, c_size_t]),
    "c10d_rpc_message_bytes": (_status, [_message_p, POINTER(c_void_p), POINTER(c_size_t)]),
    "c10d_rpc_message_set_error": (_status, [_message_p, c_char_p]),
    "c10d_rpc_init": (_status, [_store_p, c_char_p, c_int, c_int, POINTER(RpcFunctionEntry),
                                c_size_t, POINTER(RpcOptions), POINTER(_rpc_p)]),
    "c10d_rpc_worker_id": (_status, [_rpc_p, c_char_p, POINTER(c_int)]),
    "c10d_rpc_worker_name": (_status, [c_void_p, c_int, POINTER(c_char_p)]),
    "c10d_rpc_worker_count": (_status, [c_void_p, POINTER(c_int)]),
    "c10d_rpc_call": (_status, [_rpc_p, c_char_p, c_char_p, _message_p, c_int64,
                                POINTER(_future_p)]),
    "c10d_rpc_call_sync": (_status, [_rpc_p, c_char_p, c_char_p, _message_p, c_int64,
                                     POINTER(_message_p)]),
    "c10d_rpc_future_wait": (_status, [_future_p, c_int64, POINTER(_message_p)]),
    "c10d_rpc_future_test": (_status, [_future_p, POINTER(c_int)]),
    "c10d_rpc_future_on_done": (_status, [_future_p, RpcCallback, c_void_p]),
    "c10d_rpc_respond": (_status, [c_void_p, c_int, _message_p]),
    "c10d_rpc_future_free": (None, [_future_p]),
    "c10d_rpc_shutdown": (_status, [_rpc_p, c_int]),
    "c10d_rpc_free": (None, [_rpc_p]),
}

# CDLL caches the function objects it hands out, so lib.c10d_x is this prototyped one later on.
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _function = getattr(lib, _name)
    _function.restype = _restype
    _function.argtypes = _argtypes
del _name, _restype, _argtypes, _function

if lib.c10d_api_version() < API_VERSION:
    raise ImportError(f"{lib._name} implements c10d API version {lib.c10d_api_version()}; "
                      f"this package needs {API_VERSION} or later")

_ERRORS = {
    ERR_INVALID_ARGUMENT: errors.InvalidArgument,
    ERR_TIMEOUT: errors.TimeoutError,
    ERR_STORE: errors.StoreError,
    ERR_BACKEND: errors.BackendError,
    ERR_REMOTE: errors.RemoteError,
    ERR_STATE: errors.StateError,
    ERR_CHECKPOINT: errors.CheckpointError,
}


def error(status, message=None):
    """The exception for a failed call's status, with the library's text for it."""
    if message is None:
        message = lib.c10d_last_error()
    text = message.decode("utf-8", "replace") if message else lib.c10d_status_name(status).decode()
    return _ERRORS.get(status, errors.Error)(text)


def check(status):
    if status:
        raise error(status)


def created(call, *args):
    """The handle a c10d_*(..., T** out) call makes (an int), or its error raised."""
    out = c_void_p()
    check(call(*args, byref(out)))
    return out.value
