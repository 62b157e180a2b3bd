/** \file
 * c10d's C API: an operation's work, and buffers to and from DLPack (c10d/capi/c10d.h has the
 * conventions). */
#ifndef C10D_CAPI_WORK_H
#define C10D_CAPI_WORK_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- work ---- */

/** Blocks until the operation completes (timeout_ms -1: its own timeout) and returns its status.
 * C10D_ERR_TIMEOUT for a shorter timeout leaves the operation running. On CUDA buffers (NCCL)
 * it instead orders the buffers' stream after the operation and returns (set
 * C10D_NCCL_BLOCKING_WAIT=1 to block); the operation's error then arrives through
 * c10d_work_is_completed or the completion callback. */
C10D_C_EXPORT c10d_status c10d_work_wait(c10d_work* work, int64_t timeout_ms);
/** *completed: whether it has completed; the status is its error once completed with one. */
C10D_C_EXPORT c10d_status c10d_work_is_completed(c10d_work* work, int* completed);
/** The sender of a completed receive. */
C10D_C_EXPORT c10d_status c10d_work_source_rank(c10d_work* work, int* rank);
/** callback(user, status, message) once the operation completes: message is the error's text
 * ("" on success), valid during the call. Runs on the completing thread, or at once when the
 * operation has completed; it must not free this work. */
typedef void (*c10d_work_callback)(void* user, c10d_status status, const char* message);
C10D_C_EXPORT c10d_status c10d_work_on_completion(c10d_work* work, c10d_work_callback callback,
                                                  void* user);
C10D_C_EXPORT void c10d_work_free(c10d_work* work);

/* ---- DLPack ---- */

/** A buffer over a DLPack tensor's memory (no copy, ownership stays with the caller): contiguous,
 * lanes 1, a dtype above, on CPU, CUDA-host (as CPU) or CUDA. The tensor must outlive every use
 * of the buffer. (DLPack's DLTensor is an unnamed struct, so the managed tensor is what C can
 * name; every framework's __dlpack__ capsule holds one.) */
C10D_C_EXPORT c10d_status c10d_buffer_from_dlpack(const struct DLManagedTensor* tensor,
                                                  c10d_buffer* out);
/** A 1-D DLPack tensor over buffer's memory (no copy). The caller keeps the memory alive until
 * it calls the result's deleter, which it must call once. */
C10D_C_EXPORT c10d_status c10d_buffer_to_dlpack(const c10d_buffer* buffer,
                                                struct DLManagedTensor** out);

/** Deprecated names, kept until the next release: the calls above under their former names. */
C10D_C_EXPORT C10D_DEPRECATED("c10d_work_is_completed") c10d_status
    c10d_work_test(c10d_work* work, int* completed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_WORK_H */
