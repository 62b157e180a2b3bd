/** \file
 * c10d's C API: checkpoints (c10d/capi/c10d.h has the conventions). */
#ifndef C10D_CAPI_CHECKPOINT_H
#define C10D_CAPI_CHECKPOINT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checkpoints (c10d/checkpoint/Checkpoint.hpp and docs/checkpoint.md; API version 2) ----
 * A state is a list of named tensors, each a slice of a global tensor that this rank holds,
 * plus small named values. c10d_checkpoint_save writes it from every rank of a group (NULL: this
 * process alone) into one folder; c10d_checkpoint_load fills it back at any world size and
 * slicing. The buffers are read by save and written by load in place: they must stay valid until
 * the call returns (for c10d_checkpoint_saver_save, until it returns: it copies them). A save or
 * load first waits for the work queued on the CUDA streams its buffers were added with. A
 * checkpoint that is incomplete, damaged, or does not match the state fails with
 * C10D_ERR_CHECKPOINT, naming the folder, tensor, file and byte offset. */
typedef struct c10d_checkpoint_state c10d_checkpoint_state;
typedef struct c10d_checkpoint_saver c10d_checkpoint_saver;

typedef enum c10d_slice_kind {
  C10D_SLICE_BOX = 0, /**< offsets[ndim] and sizes[ndim]: a box of the global tensor */
  C10D_SLICE_FLAT = 1 /* offsets[0], sizes[0]: elements [begin, begin + count) in row-major order */
} c10d_slice_kind;

typedef struct c10d_checkpoint_save_options {
  size_t struct_size;
  int overwrite;                /**< replace a complete checkpoint at the folder */
  int64_t checksum_block_bytes; /**< bytes per checksum; 0: 1 MiB */
  const char* layout;           /**< how the job is laid out, kept for inspect; NULL: none */
} c10d_checkpoint_save_options;
#define C10D_CHECKPOINT_SAVE_OPTIONS_INIT \
  { sizeof(c10d_checkpoint_save_options), 0, 0, NULL }

typedef struct c10d_checkpoint_load_options {
  size_t struct_size;
  int allow_unexpected; /**< the checkpoint may hold tensors no rank asks for */
  int allow_missing;    /**< the state may ask for tensors and values the checkpoint lacks */
  int check_first;      /**< 1: check every block before writing any tensor (LoadOptions) */
} c10d_checkpoint_load_options;
#define C10D_CHECKPOINT_LOAD_OPTIONS_INIT \
  { sizeof(c10d_checkpoint_load_options), 0, 0, 1 }

C10D_C_EXPORT c10d_status c10d_checkpoint_state_new(c10d_checkpoint_state** state);
C10D_C_EXPORT void c10d_checkpoint_state_free(c10d_checkpoint_state* state);
/** Adds local (contiguous) as a slice of the global tensor name of global_shape[ndim] and local's
 * dtype. offsets and sizes both NULL: local is the whole tensor. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_add(c10d_checkpoint_state* state, const char* name,
                                                    const c10d_buffer* local,
                                                    const int64_t* global_shape, size_t ndim,
                                                    c10d_slice_kind kind, const int64_t* offsets,
                                                    const int64_t* sizes);
C10D_C_EXPORT c10d_status c10d_checkpoint_state_set_value(c10d_checkpoint_state* state,
                                                          const char* name, const void* data,
                                                          size_t size);
/** An integer value in the form C++'s State::setInt stores ("int64:<decimal>"), which
 * c10d-checkpoint inspect prints and latest() orders "step" by; get_int fails with
 * C10D_ERR_INVALID_ARGUMENT for a value that is absent or not such an integer. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_set_int(c10d_checkpoint_state* state,
                                                        const char* name, int64_t value);
C10D_C_EXPORT c10d_status c10d_checkpoint_state_get_int(const c10d_checkpoint_state* state,
                                                        const char* name, int64_t* value);
/** The value as set or loaded into *value (release value->data with c10d_free); *found 0 and
 * value empty when absent. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_get_value(const c10d_checkpoint_state* state,
                                                          const char* name, c10d_bytes* value,
                                                          int* found);

/** Collectives over group (NULL: this process alone). */
C10D_C_EXPORT c10d_status c10d_checkpoint_save(const c10d_checkpoint_state* state, const char* dir,
                                               c10d_group* group,
                                               const c10d_checkpoint_save_options* options);
C10D_C_EXPORT c10d_status c10d_checkpoint_load(c10d_checkpoint_state* state, const char* dir,
                                               c10d_group* group,
                                               const c10d_checkpoint_load_options* options);

/** Saves in the background (AsyncSaver): new is collective over group; save returns once the
 * state's buffers are copied, and the next save or wait returns a failed save's error. */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_new(c10d_group* group, int refuse_while_busy,
                                                    c10d_checkpoint_saver** saver);
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_save(c10d_checkpoint_saver* saver,
                                                     const c10d_checkpoint_state* state,
                                                     const char* dir,
                                                     const c10d_checkpoint_save_options* options);
/** *done: 1 when no save is running (its outcome is then what wait returns at once). */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_done(c10d_checkpoint_saver* saver, int* done);
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_wait(c10d_checkpoint_saver* saver);
/** Waits for a save in flight. */
C10D_C_EXPORT void c10d_checkpoint_saver_free(c10d_checkpoint_saver* saver);

/** The newest complete checkpoint under root into *path (c10d_free it); *found 0 when none. */
C10D_C_EXPORT c10d_status c10d_checkpoint_latest(const char* root, c10d_bytes* path, int* found);
/** Removes all but the newest keep complete checkpoints under root, and partial ones. */
C10D_C_EXPORT c10d_status c10d_checkpoint_keep_last(const char* root, size_t keep);
/** Checks every checksum: *problems their number, *report one line each (c10d_free it). */
C10D_C_EXPORT c10d_status c10d_checkpoint_verify(const char* dir, c10d_bytes* report,
                                                 int* problems);
C10D_C_EXPORT c10d_status c10d_checkpoint_consolidate(const char* dir, const char* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_CHECKPOINT_H */
