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
 * c10d_work_is_completed or the completion callback.
 * \param work the operation's handle.
 * \param timeout_ms how long to wait, in milliseconds; -1: the operation's own timeout.
 * \return C10D_OK once it completed; its error when it failed (C10D_ERR_TIMEOUT,
 *         C10D_ERR_BACKEND, C10D_ERR_INVALID_ARGUMENT, C10D_ERR_STATE, ...); C10D_ERR_TIMEOUT when
 *         timeout_ms ran out first; C10D_ERR_STATE for an op held in a coalescing block that has
 *         not ended; C10D_ERR_INVALID_ARGUMENT when work is NULL. */
C10D_C_EXPORT c10d_status c10d_work_wait(c10d_work* work, int64_t timeout_ms);
/** *completed: whether it has completed; the status is its error once completed with one.
 * Does not block; polling a pending operation starts it at once if the backend still holds it.
 * \param work the operation's handle.
 * \param[out] completed 1 when the operation has completed, else 0.
 * \return C10D_OK while it runs or once it succeeded; the operation's error once it failed;
 *         C10D_ERR_INVALID_ARGUMENT when work or completed is NULL. */
C10D_C_EXPORT c10d_status c10d_work_is_completed(c10d_work* work, int* completed);
/** The sender of a completed receive.
 * \param work the handle of a receive (the way c10d_recv_anysource's caller learns the sender).
 * \param[out] rank the sending rank, in the group.
 * \return C10D_OK; C10D_ERR_INTERNAL for an operation other than a receive, or one not completed;
 *         C10D_ERR_INVALID_ARGUMENT when work or rank is NULL. */
C10D_C_EXPORT c10d_status c10d_work_source_rank(c10d_work* work, int* rank);
/** callback(user, status, message) once the operation completes: message is the error's text
 * ("" on success), valid during the call. Runs on the completing thread, or at once when the
 * operation has completed; it must not free this work.
 * \param user the pointer given to c10d_work_on_completion.
 * \param status C10D_OK, or the operation's error.
 * \param message the error's text, "" on success; valid during the call only. */
typedef void (*c10d_work_callback)(void* user, c10d_status status, const char* message);
/** Registers callback to run once the operation completes (see c10d_work_callback); it runs once.
 * \param work the operation's handle.
 * \param callback the function; must not be NULL.
 * \param user passed to callback as is.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when work or callback is NULL. */
C10D_C_EXPORT c10d_status c10d_work_on_completion(c10d_work* work, c10d_work_callback callback,
                                                  void* user);
/** Releases the handle, as its last use. The buffers must still stay valid until the operation
 * has completed.
 * \param work the handle, or NULL (ignored). */
C10D_C_EXPORT void c10d_work_free(c10d_work* work);

/* ---- DLPack ---- */

/** A buffer over a DLPack tensor's memory (no copy, ownership stays with the caller): contiguous,
 * lanes 1, a dtype above, on CPU, CUDA-host (as CPU) or CUDA. The tensor must outlive every use
 * of the buffer. (DLPack's DLTensor is an unnamed struct, so the managed tensor is what C can
 * name; every framework's __dlpack__ capsule holds one.)
 * \param tensor the DLPack tensor; not consumed (its deleter is not called).
 * \param[out] out the buffer: every element of the tensor, its stream NULL (set it for CUDA
 *        memory that is produced on another stream).
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a tensor that is not
 *         contiguous, or an unsupported device, dtype or lanes (named). */
C10D_C_EXPORT c10d_status c10d_buffer_from_dlpack(const struct DLManagedTensor* tensor,
                                                  c10d_buffer* out);
/** A 1-D DLPack tensor over buffer's memory (no copy). The caller keeps the memory alive until
 * it calls the result's deleter, which it must call once.
 * \param buffer the buffer (its stream is not exported).
 * \param[out] out the new DLManagedTensor, the caller's until it calls its deleter.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or a bad buffer. */
C10D_C_EXPORT c10d_status c10d_buffer_to_dlpack(const c10d_buffer* buffer,
                                                struct DLManagedTensor** out);

/* Deprecated names, kept until the next release: the calls above under their former names. */
/** Deprecated: call c10d_work_is_completed, which this forwards to.
 * \param work as c10d_work_is_completed.
 * \param[out] completed as c10d_work_is_completed.
 * \return what c10d_work_is_completed returns. */
C10D_C_EXPORT C10D_DEPRECATED("c10d_work_is_completed") c10d_status
    c10d_work_test(c10d_work* work, int* completed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_WORK_H */
