/** \file
 * c10d's C API: collectives, point-to-point, and object collectives over bytes (c10d/capi/c10d.h
 * has the conventions). */
#ifndef C10D_CAPI_OPS_H
#define C10D_CAPI_OPS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- operations ----
 * Each takes the group, its buffers, options (NULL: defaults) and `work`: with work NULL the call
 * blocks until the operation completes and returns its status; otherwise it returns once the
 * operation is started and *work is its handle (c10d_work_wait, c10d_work_free). Collectives must
 * be called in the same order on every rank of the group. Ranks are ranks in the group. */

/** The options of an operation; each uses the fields that apply to it (the others are ignored).
 * Start from C10D_OP_OPTIONS_INIT. */
typedef struct c10d_op_options {
  size_t struct_size;       /**< sizeof(c10d_op_options), as C10D_OP_OPTIONS_INIT sets */
  c10d_reduce_op reduce_op; /**< reductions */
  double premul_factor;     /**< C10D_PREMUL_SUM's factor */
  int root;                 /**< rooted collectives */
  int tag;                  /**< point-to-point, >= 0 */
  int64_t timeout_ms;       /**< -1: the group's timeout */
} c10d_op_options;
/** The defaults of c10d_op_options: C10D_SUM, root 0, tag 0, the group's timeout. */
#define C10D_OP_OPTIONS_INIT \
  { sizeof(c10d_op_options), C10D_SUM, 1.0, 0, 0, -1 }

/** Broadcasts the root's buffer to every rank's buffer.
 * \param group the group.
 * \param buffer the root's input; the others' output, of the same dtype and count.
 * \param options NULL: the defaults; the call uses root and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_broadcast(c10d_group* group, const c10d_buffer* buffer,
                                         const c10d_op_options* options, c10d_work** work);
/** Reduces buffer over the ranks, in place: every rank gets the result.
 * \param group the group.
 * \param buffer this rank's input and output.
 * \param options NULL: the defaults; the call uses reduce_op, premul_factor and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_allreduce(c10d_group* group, const c10d_buffer* buffer,
                                         const c10d_op_options* options, c10d_work** work);
/** Coalescing (torch's _coalescing_manager): between start and end, the allreduces this thread
 * issues on group are held (a call without a work handle returns at once; a handle's wait fails
 * until the end) and end issues them as one fused allreduce, *work its handle (NULL: waits for
 * it). Only allreduces of one dtype, device and reduce op; anything else is refused with
 * C10D_ERR_INVALID_ARGUMENT and the block goes on. Every rank makes the same calls.
 * This call opens the calling thread's block on group.
 * \param group the group.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group or a block this thread has open
 *         already. */
C10D_C_EXPORT c10d_status c10d_group_start_coalescing(c10d_group* group);
/** Closes the calling thread's coalescing block on group and issues its allreduces as one.
 * \param group the group.
 * \param[out] work NULL: block until the fused allreduce completes; else receives its handle
 *        (already complete for a block that held nothing), freed with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group or when this thread has no block
 *         open on group; with work NULL, also the operation's own error. */
C10D_C_EXPORT c10d_status c10d_group_end_coalescing(c10d_group* group, c10d_work** work);
/** One collective over several buffers of one dtype and device.
 * Each buffer is allreduced in place, as by c10d_allreduce.
 * \param group the group.
 * \param buffers num_buffers buffers, each this rank's input and output.
 * \param num_buffers how many buffers.
 * \param options NULL: the defaults; the call uses reduce_op, premul_factor and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_allreduce_coalesced(c10d_group* group, const c10d_buffer* buffers,
                                                   size_t num_buffers,
                                                   const c10d_op_options* options,
                                                   c10d_work** work);
/** Reduces buffer over the ranks into the root's buffer.
 * The result lands on options->root; the others' buffers are left undefined.
 * \param group the group.
 * \param buffer this rank's input; on the root, also the output.
 * \param options NULL: the defaults; the call uses root, reduce_op, premul_factor and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_reduce(c10d_group* group, const c10d_buffer* buffer,
                                      const c10d_op_options* options, c10d_work** work);
/** Gathers every rank's input on every rank.
 * outputs: size() buffers shaped like input; outputs[r] receives rank r's input.
 * \param group the group.
 * \param outputs the group's size of buffers like input.
 * \param num_outputs how many outputs: the group's size.
 * \param input this rank's buffer.
 * \param options NULL: the defaults; the call uses timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_allgather(c10d_group* group, const c10d_buffer* outputs,
                                         size_t num_outputs, const c10d_buffer* input,
                                         const c10d_op_options* options, c10d_work** work);
/** Allgather into one buffer.
 * output: size() * input.count elements, rank r's input at r * input.count.
 * \param group the group.
 * \param output size() * input->count elements of input's dtype, on its device.
 * \param input this rank's buffer.
 * \param options NULL: the defaults; the call uses timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_allgather_into_tensor(c10d_group* group, const c10d_buffer* output,
                                                     const c10d_buffer* input,
                                                     const c10d_op_options* options,
                                                     c10d_work** work);
/** Gathers every rank's input on the root: outputs[r] receives rank r's input.
 * outputs: size() buffers on the root; NULL and 0 on the others.
 * \param group the group.
 * \param outputs on the root, the group's size of buffers like input; NULL elsewhere.
 * \param num_outputs on the root, the group's size; 0 elsewhere.
 * \param input this rank's buffer.
 * \param options NULL: the defaults; the call uses root and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_gather(c10d_group* group, const c10d_buffer* outputs,
                                      size_t num_outputs, const c10d_buffer* input,
                                      const c10d_op_options* options, c10d_work** work);
/** Sends the root's inputs[r] to rank r's output.
 * inputs: size() buffers on the root; NULL and 0 on the others.
 * \param group the group.
 * \param output this rank's part.
 * \param inputs on the root, the group's size of buffers like output; NULL elsewhere.
 * \param num_inputs on the root, the group's size; 0 elsewhere.
 * \param options NULL: the defaults; the call uses root and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_scatter(c10d_group* group, const c10d_buffer* output,
                                       const c10d_buffer* inputs, size_t num_inputs,
                                       const c10d_op_options* options, c10d_work** work);
/** Reduces and scatters a list of buffers.
 * output = reduction over ranks of their inputs[rank()]; inputs: size() buffers like output.
 * \param group the group.
 * \param output this rank's part of the result.
 * \param inputs the group's size of buffers like output: inputs[r] is this rank's part for r.
 * \param num_inputs how many inputs: the group's size.
 * \param options NULL: the defaults; the call uses reduce_op, premul_factor and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_reduce_scatter(c10d_group* group, const c10d_buffer* output,
                                              const c10d_buffer* inputs, size_t num_inputs,
                                              const c10d_op_options* options, c10d_work** work);
/** Reduce-scatter of one buffer.
 * input: size() * output.count elements. Rank r's output is the reduction of every rank's r-th
 * part of input.
 * \param group the group.
 * \param output this rank's part of the result.
 * \param input size() * output->count elements of output's dtype, on its device.
 * \param options NULL: the defaults; the call uses reduce_op, premul_factor and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_reduce_scatter_tensor(c10d_group* group, const c10d_buffer* output,
                                                     const c10d_buffer* input,
                                                     const c10d_op_options* options,
                                                     c10d_work** work);
/** All-to-all of buffer lists.
 * outputs[r] receives rank r's inputs[rank()]; size() buffers each.
 * \param group the group.
 * \param outputs the group's size of buffers, of the inputs' dtype and device.
 * \param num_outputs how many outputs: the group's size.
 * \param inputs the group's size of buffers of one dtype and device: inputs[r] goes to rank r.
 * \param num_inputs how many inputs: the group's size.
 * \param options NULL: the defaults; the call uses timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_alltoall(c10d_group* group, const c10d_buffer* outputs,
                                        size_t num_outputs, const c10d_buffer* inputs,
                                        size_t num_inputs, const c10d_op_options* options,
                                        c10d_work** work);
/** Flat all-to-all: with NULL splits, equal parts of count / size() elements; otherwise size()
 * element counts each (rank r's part of input goes to rank r; output's parts come in rank
 * order).
 * \param group the group.
 * \param output receives each rank's part for this rank, in rank order.
 * \param input this rank's elements, of output's dtype and device: part r goes to rank r.
 * \param output_splits elements of output from each rank (non-negative, summing to
 *        output->count), or NULL for equal parts.
 * \param input_splits elements of input for each rank (non-negative, summing to input->count),
 *        or NULL for equal parts; NULL exactly when output_splits is.
 * \param num_splits entries in each split list: the group's size (ignored with NULL splits).
 * \param options NULL: the defaults; the call uses timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_alltoall_base(c10d_group* group, const c10d_buffer* output,
                                             const c10d_buffer* input, const int64_t* output_splits,
                                             const int64_t* input_splits, size_t num_splits,
                                             const c10d_op_options* options, c10d_work** work);
/** Synchronizes the ranks: completes once every rank of group has called it (on the group's CPU
 * backend).
 * \param group the group.
 * \param options NULL: the defaults; the call uses timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad options, a group without a
 *         CPU backend, or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL,
 *         also the barrier's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_barrier(c10d_group* group, const c10d_op_options* options,
                                       c10d_work** work);
/** A barrier that names the ranks missing at the deadline (all of them with wait_all). Blocks.
 * It goes through the group's store (rank 0 collects).
 * \param group the group.
 * \param timeout_ms how long to wait, in milliseconds, counted from the call; -1: the group's
 *        timeout.
 * \param wait_all nonzero: rank 0 waits out every rank, to name all that are missing; 0: the
 *        first.
 * \return C10D_OK once every rank arrived; C10D_ERR_TIMEOUT naming the missing ranks;
 *         C10D_ERR_INVALID_ARGUMENT for a NULL group, a non-member's handle, or a group whose
 *         store is private to this process; C10D_ERR_STORE when the store fails. */
C10D_C_EXPORT c10d_status c10d_monitored_barrier(c10d_group* group, int64_t timeout_ms,
                                                 int wait_all);

/** Point-to-point: a send meets the receive of the same pair and options->tag; both must have
 * the same size in bytes. A send completes once its receive has taken the message.
 * \param group the group.
 * \param buffer the data to send.
 * \param dst the receiving rank, not this one.
 * \param options NULL: the defaults; the call uses tag and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_send(c10d_group* group, const c10d_buffer* buffer, int dst,
                                    const c10d_op_options* options, c10d_work** work);
/** Receives into buffer the message src sends with the same tag (see c10d_send).
 * \param group the group.
 * \param buffer the output, of the message's size in bytes.
 * \param src the sending rank, not this one.
 * \param options NULL: the defaults; the call uses tag and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_recv(c10d_group* group, const c10d_buffer* buffer, int src,
                                    const c10d_op_options* options, c10d_work** work);
/** Receives from whichever rank sends with the tag first: c10d_work_source_rank says which.
 * Refused (C10D_ERR_INVALID_ARGUMENT) in a group of one rank.
 * \param group the group.
 * \param buffer the output, of the message's size in bytes.
 * \param options NULL: the defaults; the call uses tag and timeout_ms.
 * \param[out] work NULL: block until the operation completes; else receives its handle, which
 *        the caller frees with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, bad buffers, ranks or options,
 *         or a non-member's handle; C10D_ERR_STATE after a shutdown; with work NULL, also the
 *         operation's own error (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_recv_anysource(c10d_group* group, const c10d_buffer* buffer,
                                              const c10d_op_options* options, c10d_work** work);

/** The kind of one operation of c10d_batch_isend_irecv. */
typedef enum c10d_p2p_kind { C10D_P2P_SEND = 0, C10D_P2P_RECV = 1 } c10d_p2p_kind;
/** \var C10D_P2P_SEND
 * Sends the op's buffer to its peer. */
/** \var C10D_P2P_RECV
 * Receives from the op's peer into the op's buffer. */
/** One send or receive of c10d_batch_isend_irecv. */
typedef struct c10d_p2p_op {
  c10d_p2p_kind kind; /**< send or receive */
  c10d_buffer buffer; /**< what to send, or where to receive */
  int peer;           /**< the other rank, not this one */
  int tag;            /**< matches a send with a receive, >= 0 */
} c10d_p2p_op;
/** Starts every op as one batch (NCCL: one group call). works: num_ops handles, or NULL to block
 * until all have completed.
 * \param group the group.
 * \param ops num_ops operations, their buffers on one device.
 * \param num_ops how many operations, at least 1.
 * \param timeout_ms the whole batch's timeout, in milliseconds; -1: the group's.
 * \param[out] works NULL: block until every op is over; else an array of num_ops that receives
 *        a handle per op, in the order of ops (a backend that fuses the batch gives every op the
 *        same operation), each freed with c10d_work_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group, no ops, a bad kind, buffer, peer
 *         or tag, or a non-member's handle; C10D_ERR_STATE after a shutdown; with works NULL, the
 *         first op's error once all are over. */
C10D_C_EXPORT c10d_status c10d_batch_isend_irecv(c10d_group* group, const c10d_p2p_op* ops,
                                                 size_t num_ops, int64_t timeout_ms,
                                                 c10d_work** works);

/* ---- object collectives over bytes (API version 4; c10d/ObjectCollectives.hpp) ----
 * torch's all_gather_object and friends with the serialising left to the caller: each moves
 * bytes of any length, the sizes first, then the bytes. Blocking and collective over group (send
 * and recv: the two ranks); ranks are the group's. Results are allocated by the library: release
 * each c10d_bytes.data, then any array of them, with c10d_free. A rank whose announced size is
 * negative fails C10D_ERR_INTERNAL naming it; src with a count other than the group's size in
 * scatter fails C10D_ERR_INVALID_ARGUMENT on every rank. */

/** Gathers every rank's bytes on every rank.
 * *out: c10d_group_size(group) c10d_bytes, rank r's at [r].
 * \param group the group.
 * \param data this rank's bytes; may be NULL when size is 0.
 * \param size bytes at data.
 * \param[out] out the array of every rank's bytes: c10d_free each element's data, then the array.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or a non-member's handle; the
 *         collectives' errors (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND, C10D_ERR_STATE). */
C10D_C_EXPORT c10d_status c10d_all_gather_bytes(c10d_group* group, const void* data, size_t size,
                                                c10d_bytes** out);
/** Broadcasts src's bytes.
 * src's data/size (read on src only) into *out on every rank, src too.
 * \param group the group.
 * \param data src's bytes (ignored elsewhere); may be NULL when size is 0.
 * \param size bytes at data, on src.
 * \param src the sending rank.
 * \param[out] out src's bytes: c10d_free out->data.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a bad src or a non-member's
 *         handle; the collectives' errors (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND, C10D_ERR_STATE). */
C10D_C_EXPORT c10d_status c10d_broadcast_bytes(c10d_group* group, const void* data, size_t size,
                                               int src, c10d_bytes* out);
/** Gathers every rank's bytes on dst.
 * On dst *out as in c10d_all_gather_bytes; elsewhere *out NULL.
 * \param group the group.
 * \param data this rank's bytes; may be NULL when size is 0.
 * \param size bytes at data.
 * \param dst the gathering rank.
 * \param[out] out on dst, the array of every rank's bytes (c10d_free each element's data, then
 *        the array); NULL elsewhere.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a bad dst or a non-member's
 *         handle; the collectives' errors (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND, C10D_ERR_STATE). */
C10D_C_EXPORT c10d_status c10d_gather_bytes(c10d_group* group, const void* data, size_t size,
                                            int dst, c10d_bytes** out);
/** Scatters src's pieces, one to each rank.
 * pieces: count of them on src, one per rank (NULL and 0 elsewhere); rank r gets src's [r].
 * \param group the group.
 * \param pieces on src, the group's size of pieces (read only there).
 * \param count on src, how many pieces: the group's size.
 * \param src the scattering rank.
 * \param[out] out this rank's piece: c10d_free out->data.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a bad src, a count other than
 *         the group's size on src (on every rank), or a non-member's handle; the collectives'
 *         errors (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND, C10D_ERR_STATE). */
C10D_C_EXPORT c10d_status c10d_scatter_bytes(c10d_group* group, const c10d_bytes* pieces,
                                             size_t count, int src, c10d_bytes* out);
/** Sends bytes of any length to dst, which receives them with c10d_recv_bytes and the same tag.
 * \param group the group.
 * \param data the bytes; may be NULL when size is 0.
 * \param size bytes at data.
 * \param dst the receiving rank.
 * \param tag matches the receive, >= 0.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a bad dst or tag, or a
 *         non-member's handle; the operations' errors (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND,
 *         C10D_ERR_STATE). */
C10D_C_EXPORT c10d_status c10d_send_bytes(c10d_group* group, const void* data, size_t size, int dst,
                                          int tag);
/** Receives the bytes src sends with c10d_send_bytes and the same tag.
 * \param group the group.
 * \param src the sending rank.
 * \param tag matches the send, >= 0.
 * \param[out] out the bytes: c10d_free out->data.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a bad src or tag, or a
 *         non-member's handle; C10D_ERR_INTERNAL when src announced a negative size; the
 *         operations' errors (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND, C10D_ERR_STATE). */
C10D_C_EXPORT c10d_status c10d_recv_bytes(c10d_group* group, int src, int tag, c10d_bytes* out);

/* Deprecated names, kept until the next release: the calls above under their former names. */
/** Deprecated: call c10d_allgather_into_tensor, which this forwards to.
 * \param group as c10d_allgather_into_tensor.
 * \param output as c10d_allgather_into_tensor.
 * \param input as c10d_allgather_into_tensor.
 * \param options as c10d_allgather_into_tensor.
 * \param[out] work as c10d_allgather_into_tensor.
 * \return what c10d_allgather_into_tensor returns. */
C10D_C_EXPORT C10D_DEPRECATED("c10d_allgather_into_tensor") c10d_status
    c10d_allgather_into(c10d_group* group, const c10d_buffer* output, const c10d_buffer* input,
                        const c10d_op_options* options, c10d_work** work);
/** Deprecated: call c10d_reduce_scatter_tensor, which this forwards to.
 * \param group as c10d_reduce_scatter_tensor.
 * \param output as c10d_reduce_scatter_tensor.
 * \param input as c10d_reduce_scatter_tensor.
 * \param options as c10d_reduce_scatter_tensor.
 * \param[out] work as c10d_reduce_scatter_tensor.
 * \return what c10d_reduce_scatter_tensor returns. */
C10D_C_EXPORT C10D_DEPRECATED("c10d_reduce_scatter_tensor") c10d_status
    c10d_reduce_scatter_into(c10d_group* group, const c10d_buffer* output, const c10d_buffer* input,
                             const c10d_op_options* options, c10d_work** work);
/** Deprecated: call c10d_recv_anysource, which this forwards to.
 * \param group as c10d_recv_anysource.
 * \param buffer as c10d_recv_anysource.
 * \param options as c10d_recv_anysource.
 * \param[out] work as c10d_recv_anysource.
 * \return what c10d_recv_anysource returns. */
C10D_C_EXPORT C10D_DEPRECATED("c10d_recv_anysource") c10d_status
    c10d_recv_any(c10d_group* group, const c10d_buffer* buffer, const c10d_op_options* options,
                  c10d_work** work);
/** Deprecated: call c10d_alltoall_base, which this forwards to.
 * \param group as c10d_alltoall_base.
 * \param output as c10d_alltoall_base.
 * \param input as c10d_alltoall_base.
 * \param output_splits as c10d_alltoall_base.
 * \param input_splits as c10d_alltoall_base.
 * \param num_splits as c10d_alltoall_base.
 * \param options as c10d_alltoall_base.
 * \param[out] work as c10d_alltoall_base.
 * \return what c10d_alltoall_base returns. */
C10D_C_EXPORT C10D_DEPRECATED("c10d_alltoall_base") c10d_status
    c10d_alltoall_single(c10d_group* group, const c10d_buffer* output, const c10d_buffer* input,
                         const int64_t* output_splits, const int64_t* input_splits,
                         size_t num_splits, const c10d_op_options* options, c10d_work** work);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_OPS_H */
