/** \file
 * c10d's C API: the data-parallel reducer (c10d/capi/c10d.h has the conventions). */
#ifndef C10D_CAPI_DDP_H
#define C10D_CAPI_DDP_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data-parallel reducer ----
 * DDP's gradient reducer (c10d/training/DistributedDataParallel.hpp): gradients registered once,
 * marked ready as the framework's backward produces them (any thread), reduced in buckets while
 * the backward goes on, averaged over the ranks by c10d_ddp_finalize_backward. */

/** A reducer handle: free it with c10d_ddp_free. */
typedef struct c10d_ddp c10d_ddp;

/** One registered parameter: its values and where its gradient is. The memory of both must stay
 * valid while the reducer lives. */
typedef struct c10d_ddp_parameter {
  c10d_buffer value; /**< the parameter: floating point, contiguous */
  c10d_buffer grad;  /**< same dtype, device, count; data NULL with gradient_as_bucket_view */
  const char* name;  /**< for errors; may be NULL */
} c10d_ddp_parameter;

/** How the reducer communicates a bucket (c10d_ddp_options.hook). */
typedef enum c10d_ddp_hook {
  C10D_DDP_ALLREDUCE = 0, /**< average in the gradients' dtype */
  C10D_DDP_FP16 = 1,      /**< reduce in float16: half the bytes (CPU float32/float64 buckets) */
  C10D_DDP_BF16 = 2       /**< reduce in bfloat16 (CPU float32/float64 buckets) */
} c10d_ddp_hook;

/** The reducer's settings: start from C10D_DDP_OPTIONS_INIT. */
typedef struct c10d_ddp_options {
  size_t struct_size;        /**< sizeof(c10d_ddp_options), as C10D_DDP_OPTIONS_INIT sets */
  size_t first_bucket_bytes; /**< the first (last layers') bucket, small to start early */
  size_t bucket_cap_bytes;   /**< the others */
  /** Nonzero: a rank may leave parameters unmarked in a backward (it contributes zeros; one no
   * rank used keeps its gradient). 0: that is C10D_ERR_INVALID_ARGUMENT at finalize. */
  int find_unused_parameters;
  int gradient_as_bucket_view; /**< the reducer owns the gradients: c10d_ddp_gradient */
  /** Nonzero: with uneven inputs, divide by the world size instead of by the ranks still
   * training (c10d_ddp_prepare_for_backward). */
  int divide_by_initial_world_size;
  int rebuild_buckets; /**< after the first backward, in the order rank 0 saw gradients ready */
  c10d_ddp_hook hook;  /**< how buckets are reduced */
} c10d_ddp_options;
/** The defaults of c10d_ddp_options: a 1 MiB first bucket, 25 MiB others, buckets rebuilt after
 * the first backward, C10D_DDP_ALLREDUCE. */
#define C10D_DDP_OPTIONS_INIT \
  { sizeof(c10d_ddp_options), 1u << 20, 25u << 20, 0, 0, 0, 1, 0 }

/** Every rank of group registers the same parameters in the same order.
 * \param group the group to reduce over (the reducer keeps it alive).
 * \param parameters num_parameters parameters, in the same order on every rank.
 * \param num_parameters how many parameters.
 * \param options the reducer's settings; NULL: the defaults.
 * \param[out] out the reducer; the caller frees it with c10d_ddp_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, bad options or hook, or a
 *         parameter that is not floating point or contiguous, is registered twice, is on a
 *         device the group has no backend for, or whose grad does not match it (named). */
C10D_C_EXPORT c10d_status c10d_ddp_create(c10d_group* group, const c10d_ddp_parameter* parameters,
                                          size_t num_parameters, const c10d_ddp_options* options,
                                          c10d_ddp** out);
/** Collective: checks that the ranks registered the same parameters, then broadcasts them (and
 * buffers, may be NULL) from root.
 * \param ddp the reducer.
 * \param buffers num_buffers more buffers to broadcast (a model's non-parameter state), or NULL.
 * \param num_buffers how many buffers.
 * \param root the rank whose values every rank gets.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL ddp, a bad buffer, a root out of
 *         range, or ranks that registered different parameters (naming the first difference);
 *         the broadcasts' errors (C10D_ERR_TIMEOUT, C10D_ERR_BACKEND). */
C10D_C_EXPORT c10d_status c10d_ddp_sync_parameters(c10d_ddp* ddp, const c10d_buffer* buffers,
                                                   size_t num_buffers, int root);
/** Optional, before a backward: how many ranks run it (uneven inputs); -1: all.
 * \param ddp the reducer.
 * \param active_ranks the ranks still training, in [1, world size], or -1.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL ddp, an out-of-range count, or fewer
 *         ranks than all with no-sync on. */
C10D_C_EXPORT c10d_status c10d_ddp_prepare_for_backward(c10d_ddp* ddp, int active_ranks);
/** Gradient index is final for this backward; any thread.
 * A bucket whose gradients are all ready is reduced (after the buckets before it).
 * \param ddp the reducer.
 * \param index the parameter's index in the registration.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL ddp, an index out of range, or one
 *         marked twice in a backward (the collectives' errors come from
 *         c10d_ddp_finalize_backward). */
C10D_C_EXPORT c10d_status c10d_ddp_mark_grad_ready(c10d_ddp* ddp, size_t index);
/** Waits for every bucket; *synced (may be NULL): 0 for a no-sync backward.
 * Reduces what is left and leaves the averages in the gradients; once per backward.
 * \param ddp the reducer.
 * \param[out] synced 1 when the gradients were reduced, 0 for a no-sync backward; may be NULL.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL ddp, a second finalize without marks
 *         between, or a gradient some rank did not mark (without find_unused_parameters; the
 *         gradients hold averages then); the collectives' errors (C10D_ERR_TIMEOUT,
 *         C10D_ERR_BACKEND), after which the group's collectives no longer pair up. */
C10D_C_EXPORT c10d_status c10d_ddp_finalize_backward(c10d_ddp* ddp, int* synced);
/** On a rank out of data: the collectives of one backward with zeros.
 * Its own gradients are not touched.
 * \param ddp the reducer.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL ddp, or during a backward (gradients
 *         marked since the last c10d_ddp_finalize_backward); the collectives' errors. */
C10D_C_EXPORT c10d_status c10d_ddp_shadow_backward(c10d_ddp* ddp);
/** Nonzero: backwards accumulate without communicating until it is set back to 0.
 * The first backward after that reduces the accumulated sums.
 * \param ddp the reducer.
 * \param no_sync nonzero to stop communicating, 0 to resume.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when ddp is NULL. */
C10D_C_EXPORT c10d_status c10d_ddp_set_no_sync(c10d_ddp* ddp, int no_sync);
/** Where gradient index lives (with gradient_as_bucket_view, the reducer's memory: fetch it again
 * after each c10d_ddp_finalize_backward, as the first one may move it).
 * \param ddp the reducer.
 * \param index the parameter's index in the registration.
 * \param[out] out the gradient's buffer (its stream NULL): the registered grad, or the
 *        reducer's memory, valid while the reducer lives and until it moves.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL ddp or out, or an index out of range. */
C10D_C_EXPORT c10d_status c10d_ddp_gradient(c10d_ddp* ddp, size_t index, c10d_buffer* out);
/** Releases the reducer (ending a no-sync period) and its hold on the group; the registered
 * memory is the caller's again.
 * \param ddp the reducer, or NULL (ignored). */
C10D_C_EXPORT void c10d_ddp_free(c10d_ddp* ddp);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_DDP_H */
