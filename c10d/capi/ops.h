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

typedef struct c10d_op_options {
  size_t struct_size;
  c10d_reduce_op reduce_op; /**< reductions */
  double premul_factor;     /**< C10D_PREMUL_SUM's factor */
  int root;                 /**< rooted collectives */
  int tag;                  /**< point-to-point, >= 0 */
  int64_t timeout_ms;       /**< -1: the group's timeout */
} c10d_op_options;
#define C10D_OP_OPTIONS_INIT \
  { sizeof(c10d_op_options), C10D_SUM, 1.0, 0, 0, -1 }

C10D_C_EXPORT c10d_status c10d_broadcast(c10d_group* group, const c10d_buffer* buffer,
                                         const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT c10d_status c10d_allreduce(c10d_group* group, const c10d_buffer* buffer,
                                         const c10d_op_options* options, c10d_work** work);
/** Coalescing (torch's _coalescing_manager): between start and end, the allreduces this thread
 * issues on group are held (a call without a work handle returns at once; a handle's wait fails
 * until the end) and end issues them as one fused allreduce, *work its handle (NULL: waits for
 * it). Only allreduces of one dtype, device and reduce op; anything else is refused with
 * C10D_ERR_INVALID_ARGUMENT and the block goes on. */
C10D_C_EXPORT c10d_status c10d_group_start_coalescing(c10d_group* group);
C10D_C_EXPORT c10d_status c10d_group_end_coalescing(c10d_group* group, c10d_work** work);
/** One collective over several buffers of one dtype and device. */
C10D_C_EXPORT c10d_status c10d_allreduce_coalesced(c10d_group* group, const c10d_buffer* buffers,
                                                   size_t num_buffers,
                                                   const c10d_op_options* options,
                                                   c10d_work** work);
/** The result lands on options->root; the others' buffers are left undefined. */
C10D_C_EXPORT c10d_status c10d_reduce(c10d_group* group, const c10d_buffer* buffer,
                                      const c10d_op_options* options, c10d_work** work);
/** outputs: size() buffers shaped like input; outputs[r] receives rank r's input. */
C10D_C_EXPORT c10d_status c10d_allgather(c10d_group* group, const c10d_buffer* outputs,
                                         size_t num_outputs, const c10d_buffer* input,
                                         const c10d_op_options* options, c10d_work** work);
/** output: size() * input.count elements, rank r's input at r * input.count. */
C10D_C_EXPORT c10d_status c10d_allgather_into_tensor(c10d_group* group, const c10d_buffer* output,
                                                     const c10d_buffer* input,
                                                     const c10d_op_options* options,
                                                     c10d_work** work);
/** outputs: size() buffers on the root; NULL and 0 on the others. */
C10D_C_EXPORT c10d_status c10d_gather(c10d_group* group, const c10d_buffer* outputs,
                                      size_t num_outputs, const c10d_buffer* input,
                                      const c10d_op_options* options, c10d_work** work);
/** inputs: size() buffers on the root; NULL and 0 on the others. */
C10D_C_EXPORT c10d_status c10d_scatter(c10d_group* group, const c10d_buffer* output,
                                       const c10d_buffer* inputs, size_t num_inputs,
                                       const c10d_op_options* options, c10d_work** work);
/** output = reduction over ranks of their inputs[rank()]; inputs: size() buffers like output. */
C10D_C_EXPORT c10d_status c10d_reduce_scatter(c10d_group* group, const c10d_buffer* output,
                                              const c10d_buffer* inputs, size_t num_inputs,
                                              const c10d_op_options* options, c10d_work** work);
/** input: size() * output.count elements. */
C10D_C_EXPORT c10d_status c10d_reduce_scatter_tensor(c10d_group* group, const c10d_buffer* output,
                                                     const c10d_buffer* input,
                                                     const c10d_op_options* options,
                                                     c10d_work** work);
/** outputs[r] receives rank r's inputs[rank()]; size() buffers each. */
C10D_C_EXPORT c10d_status c10d_alltoall(c10d_group* group, const c10d_buffer* outputs,
                                        size_t num_outputs, const c10d_buffer* inputs,
                                        size_t num_inputs, const c10d_op_options* options,
                                        c10d_work** work);
/** Flat all-to-all: with NULL splits, equal parts of count / size() elements; otherwise size()
 * element counts each (rank r's part of input goes to rank r; output's parts come in rank
 * order). */
C10D_C_EXPORT c10d_status c10d_alltoall_base(c10d_group* group, const c10d_buffer* output,
                                             const c10d_buffer* input, const int64_t* output_splits,
                                             const int64_t* input_splits, size_t num_splits,
                                             const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT c10d_status c10d_barrier(c10d_group* group, const c10d_op_options* options,
                                       c10d_work** work);
/** A barrier that names the ranks missing at the deadline (all of them with wait_all). Blocks. */
C10D_C_EXPORT c10d_status c10d_monitored_barrier(c10d_group* group, int64_t timeout_ms,
                                                 int wait_all);

/** Point-to-point: a send meets the receive of the same pair and options->tag; both must have
 * the same size in bytes. */
C10D_C_EXPORT c10d_status c10d_send(c10d_group* group, const c10d_buffer* buffer, int dst,
                                    const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT c10d_status c10d_recv(c10d_group* group, const c10d_buffer* buffer, int src,
                                    const c10d_op_options* options, c10d_work** work);
/** Receives from whichever rank sends with the tag first: c10d_work_source_rank says which. */
C10D_C_EXPORT c10d_status c10d_recv_anysource(c10d_group* group, const c10d_buffer* buffer,
                                              const c10d_op_options* options, c10d_work** work);

typedef enum c10d_p2p_kind { C10D_P2P_SEND = 0, C10D_P2P_RECV = 1 } c10d_p2p_kind;
typedef struct c10d_p2p_op {
  c10d_p2p_kind kind;
  c10d_buffer buffer;
  int peer;
  int tag;
} c10d_p2p_op;
/** Starts every op as one batch (NCCL: one group call). works: num_ops handles, or NULL to block
 * until all have completed. */
C10D_C_EXPORT c10d_status c10d_batch_isend_irecv(c10d_group* group, const c10d_p2p_op* ops,
                                                 size_t num_ops, int64_t timeout_ms,
                                                 c10d_work** works);

/* ---- object collectives over bytes (API version 4; c10d/ObjectCollectives.hpp) ----
 * torch's all_gather_object and friends with the serialising left to the caller: each moves
 * bytes of any length, the sizes first, then the bytes. Blocking and collective over group (send
 * and recv: the two ranks); ranks are the group's. Results are allocated by the library: release
 * each c10d_bytes.data, then any array of them, with c10d_free. A rank whose announced size is
 * negative fails C10D_ERR naming it; src with a count other than the group's size in scatter
 * fails C10D_ERR_INVALID_ARGUMENT on every rank. */

/** *out: c10d_group_size(group) c10d_bytes, rank r's at [r]. */
C10D_C_EXPORT c10d_status c10d_all_gather_bytes(c10d_group* group, const void* data, size_t size,
                                                c10d_bytes** out);
/** src's data/size (read on src only) into *out on every rank, src too. */
C10D_C_EXPORT c10d_status c10d_broadcast_bytes(c10d_group* group, const void* data, size_t size,
                                               int src, c10d_bytes* out);
/** On dst *out as in c10d_all_gather_bytes; elsewhere *out NULL. */
C10D_C_EXPORT c10d_status c10d_gather_bytes(c10d_group* group, const void* data, size_t size,
                                            int dst, c10d_bytes** out);
/** pieces: count of them on src, one per rank (NULL and 0 elsewhere); rank r gets src's [r]. */
C10D_C_EXPORT c10d_status c10d_scatter_bytes(c10d_group* group, const c10d_bytes* pieces,
                                             size_t count, int src, c10d_bytes* out);
C10D_C_EXPORT c10d_status c10d_send_bytes(c10d_group* group, const void* data, size_t size, int dst,
                                          int tag);
C10D_C_EXPORT c10d_status c10d_recv_bytes(c10d_group* group, int src, int tag, c10d_bytes* out);

/** Deprecated names, kept until the next release: the calls above under their former names. */
C10D_C_EXPORT C10D_DEPRECATED("c10d_allgather_into_tensor") c10d_status
    c10d_allgather_into(c10d_group* group, const c10d_buffer* output, const c10d_buffer* input,
                        const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT C10D_DEPRECATED("c10d_reduce_scatter_tensor") c10d_status
    c10d_reduce_scatter_into(c10d_group* group, const c10d_buffer* output, const c10d_buffer* input,
                             const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT C10D_DEPRECATED("c10d_recv_anysource") c10d_status
    c10d_recv_any(c10d_group* group, const c10d_buffer* buffer, const c10d_op_options* options,
                  c10d_work** work);
C10D_C_EXPORT C10D_DEPRECATED("c10d_alltoall_base") c10d_status
    c10d_alltoall_single(c10d_group* group, const c10d_buffer* output, const c10d_buffer* input,
                         const int64_t* output_splits, const int64_t* input_splits,
                         size_t num_splits, const c10d_op_options* options, c10d_work** work);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_OPS_H */
