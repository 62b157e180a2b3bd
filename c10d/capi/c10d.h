/** \file
 * c10d's C API: stores, process groups, collectives, point-to-point and their Work, RPC, for
 * programs and language bindings (Rust, Julia, Go, Java, Python's ctypes) that link C.
 *
 * Plain C99; no C++ type or exception crosses this header. Link c10d::c (libc10d_c.so.1): it
 * exports only c10d_* symbols, and its soname changes when this ABI does.
 *
 * Errors: every call returns a c10d_status. On failure, c10d_last_error() returns the same text
 * the C++ library's exception carries (what failed, where: rank, peer, key, op, tag, and what to
 * do). It is thread-local and stays valid until the calling thread's next failing c10d call.
 *
 * Handles (c10d_store, c10d_group, c10d_work, c10d_rpc, c10d_rpc_future, c10d_rpc_message) are
 * opaque; each is released with its own *_free call, exactly once. A group keeps its store alive
 * and a work keeps its group alive, so they may be freed in any order.
 *
 * Option structs carry their size in their first field, so that later versions can add fields
 * without breaking callers built against this one: start from the *_INIT macro, then set what
 * you need. A NULL options pointer means the defaults, except for c10d_store_tcp, whose options
 * name the server to reach.
 *
 * Threading: every call may be made from any thread; a store, group, work or RPC agent may be used
 * by several threads at once, except that *_free must be the handle's last use. An RPC message
 * is one thread's at a time; a reducer follows the C++ one (c10d_ddp_mark_grad_ready from any
 * thread, its other calls from one). Completion callbacks and RPC functions run on library
 * threads (a callback at once on the caller's, for a work that has already completed): they must
 * not free or shut down a group or an agent, whose threads they run on.
 *
 * Buffers: a c10d_buffer describes `count` contiguous elements of `dtype` at `data` on a device.
 * Operations read and write them in place (zero copy); the memory must stay valid until the
 * operation's work has completed. For CUDA memory, `stream` is the cudaStream_t the data is
 * produced and consumed on: the operation is ordered after the work queued on it (NULL: the
 * legacy default stream).
 *
 * The API is in parts, one header each, all included here: c10d/capi/common.h (versions,
 * statuses, element types, buffers, handles), store.h, group.h (groups, device meshes), ops.h
 * (collectives, point-to-point, object collectives), work.h (work, DLPack), ddp.h, rpc.h,
 * checkpoint.h and elastic.h. Names follow the C++ ones (c10d_allgather_into_tensor is
 * ProcessGroup::allgatherIntoTensor); a renamed call keeps its former name, marked deprecated,
 * for one release (CHANGELOG.md). */
#ifndef C10D_CAPI_C10D_H
#define C10D_CAPI_C10D_H

#include "checkpoint.h"
#include "common.h"
#include "ddp.h"
#include "elastic.h"
#include "group.h"
#include "ops.h"
#include "rpc.h"
#include "store.h"
#include "work.h"

#endif /* C10D_CAPI_C10D_H */
