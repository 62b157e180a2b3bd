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

typedef struct c10d_ddp c10d_ddp;

typedef struct c10d_ddp_parameter {
  c10d_buffer value;
  c10d_buffer grad; /**< same dtype, device, count; data NULL with gradient_as_bucket_view */
  const char* name; /**< for errors; may be NULL */
} c10d_ddp_parameter;

typedef enum c10d_ddp_hook {
  C10D_DDP_ALLREDUCE = 0, /**< average in the gradients' dtype */
  C10D_DDP_FP16 = 1,      /**< reduce in float16: half the bytes (CPU float32/float64 buckets) */
  C10D_DDP_BF16 = 2       /* reduce in bfloat16 */
} c10d_ddp_hook;

typedef struct c10d_ddp_options {
  size_t struct_size;
  size_t first_bucket_bytes; /**< the first (last layers') bucket, small to start early */
  size_t bucket_cap_bytes;   /**< the others */
  int find_unused_parameters;
  int gradient_as_bucket_view; /**< the reducer owns the gradients: c10d_ddp_gradient */
  int divide_by_initial_world_size;
  int rebuild_buckets; /**< after the first backward, in the order rank 0 saw gradients ready */
  c10d_ddp_hook hook;
} c10d_ddp_options;
#define C10D_DDP_OPTIONS_INIT \
  { sizeof(c10d_ddp_options), 1u << 20, 25u << 20, 0, 0, 0, 1, 0 }

/** Every rank of group registers the same parameters in the same order. */
C10D_C_EXPORT c10d_status c10d_ddp_create(c10d_group* group, const c10d_ddp_parameter* parameters,
                                          size_t num_parameters, const c10d_ddp_options* options,
                                          c10d_ddp** out);
/** Collective: checks that the ranks registered the same parameters, then broadcasts them (and
 * buffers, may be NULL) from root. */
C10D_C_EXPORT c10d_status c10d_ddp_sync_parameters(c10d_ddp* ddp, const c10d_buffer* buffers,
                                                   size_t num_buffers, int root);
/** Optional, before a backward: how many ranks run it (uneven inputs); -1: all. */
C10D_C_EXPORT c10d_status c10d_ddp_prepare_for_backward(c10d_ddp* ddp, int active_ranks);
/** Gradient index is final for this backward; any thread. */
C10D_C_EXPORT c10d_status c10d_ddp_mark_grad_ready(c10d_ddp* ddp, size_t index);
/** Waits for every bucket; *synced (may be NULL): 0 for a no-sync backward. */
C10D_C_EXPORT c10d_status c10d_ddp_finalize_backward(c10d_ddp* ddp, int* synced);
/** On a rank out of data: the collectives of one backward with zeros. */
C10D_C_EXPORT c10d_status c10d_ddp_shadow_backward(c10d_ddp* ddp);
/** Nonzero: backwards accumulate without communicating until it is set back to 0. */
C10D_C_EXPORT c10d_status c10d_ddp_set_no_sync(c10d_ddp* ddp, int no_sync);
/** Where gradient index lives (with gradient_as_bucket_view, the reducer's memory: fetch it again
 * after each c10d_ddp_finalize_backward, as the first one may move it). */
C10D_C_EXPORT c10d_status c10d_ddp_gradient(c10d_ddp* ddp, size_t index, c10d_buffer* out);
C10D_C_EXPORT void c10d_ddp_free(c10d_ddp* ddp);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_DDP_H */
