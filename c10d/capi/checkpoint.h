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
/** A checkpoint state: named tensor slices and small values. Free it with
 * c10d_checkpoint_state_free. */
typedef struct c10d_checkpoint_state c10d_checkpoint_state;
/** A background saver (c10d_checkpoint_saver_new): free it with c10d_checkpoint_saver_free. */
typedef struct c10d_checkpoint_saver c10d_checkpoint_saver;

/** How c10d_checkpoint_state_add's offsets and sizes describe the rank's slice. */
typedef enum c10d_slice_kind {
  C10D_SLICE_BOX = 0, /**< offsets[ndim] and sizes[ndim]: a box of the global tensor */
  C10D_SLICE_FLAT = 1 /**< offsets[0], sizes[0]: elements [begin, begin + count) in row-major
                           order */
} c10d_slice_kind;

/** How a save writes: start from C10D_CHECKPOINT_SAVE_OPTIONS_INIT. Every rank passes the same. */
typedef struct c10d_checkpoint_save_options {
  size_t struct_size;           /**< sizeof(c10d_checkpoint_save_options) */
  int overwrite;                /**< replace a complete checkpoint at the folder */
  int64_t checksum_block_bytes; /**< bytes per checksum, up to 256 MiB; 0: 1 MiB */
  const char* layout;           /**< how the job is laid out, kept for inspect; NULL: none */
} c10d_checkpoint_save_options;
/** The defaults of c10d_checkpoint_save_options: no overwrite, 1 MiB blocks, no layout. */
#define C10D_CHECKPOINT_SAVE_OPTIONS_INIT \
  { sizeof(c10d_checkpoint_save_options), 0, 0, NULL }

/** What a load accepts: start from C10D_CHECKPOINT_LOAD_OPTIONS_INIT. */
typedef struct c10d_checkpoint_load_options {
  size_t struct_size;   /**< sizeof(c10d_checkpoint_load_options), as the _INIT macro sets */
  int allow_unexpected; /**< the checkpoint may hold tensors no rank asks for */
  int allow_missing;    /**< the state may ask for tensors and values the checkpoint lacks */
  int check_first;      /**< 1: check every block before writing any tensor (LoadOptions) */
} c10d_checkpoint_load_options;
/** The defaults of c10d_checkpoint_load_options: strict, checking every block first. */
#define C10D_CHECKPOINT_LOAD_OPTIONS_INIT \
  { sizeof(c10d_checkpoint_load_options), 0, 0, 1 }

/** An empty state.
 * \param[out] state the state; the caller frees it with c10d_checkpoint_state_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when state is NULL. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_new(c10d_checkpoint_state** state);
/** Releases the state; its buffers stay the caller's.
 * \param state the state, or NULL (ignored). */
C10D_C_EXPORT void c10d_checkpoint_state_free(c10d_checkpoint_state* state);
/** Adds local (contiguous) as a slice of the global tensor name of global_shape[ndim] and local's
 * dtype. offsets and sizes both NULL: local is the whole tensor.
 * The state refers to local's memory (no copy); a CUDA buffer's stream is waited for before each
 * save, load or heal.
 * \param state the state.
 * \param name the global tensor's name (no '@', not "__metadata__").
 * \param local this rank's slice: as many elements as the slice has.
 * \param global_shape ndim sizes of the global tensor.
 * \param ndim the global tensor's number of dimensions.
 * \param kind how offsets and sizes describe the slice (ignored when both are NULL).
 * \param offsets the slice's start (see c10d_slice_kind), or NULL.
 * \param sizes the slice's extent (see c10d_slice_kind), or NULL.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL state, name, local or global_shape, a bad
 *         buffer or kind, only one of offsets and sizes, a slice outside the tensor or of another
 *         size than local, or a tensor added before with another dtype or shape, or the same
 *         slice. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_add(c10d_checkpoint_state* state, const char* name,
                                                    const c10d_buffer* local,
                                                    const int64_t* global_shape, size_t ndim,
                                                    c10d_slice_kind kind, const int64_t* offsets,
                                                    const int64_t* sizes);
/** Sets a small named value (copied). A value set on several ranks must be equal there (a save
 * checks it); a load replaces it with the checkpoint's.
 * \param state the state.
 * \param name the value's name, not empty.
 * \param data the bytes; may be NULL when size is 0.
 * \param size bytes at data.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL state or name, an empty name, or NULL
 *         data with a size. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_set_value(c10d_checkpoint_state* state,
                                                          const char* name, const void* data,
                                                          size_t size);
/** An integer value in the form C++'s State::setInt stores ("int64:<decimal>"), which
 * c10d-checkpoint inspect prints and latest() orders "step" by; get_int fails with
 * C10D_ERR_INVALID_ARGUMENT for a value that is absent or not such an integer.
 * \param state the state.
 * \param name the value's name, not empty.
 * \param value the integer.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL state or name, or an empty name. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_set_int(c10d_checkpoint_state* state,
                                                        const char* name, int64_t value);
/** An integer value set by c10d_checkpoint_state_set_int (or loaded).
 * \param state the state.
 * \param name the value's name.
 * \param[out] value the integer.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, or a value that is absent or
 *         not such an integer. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_get_int(const c10d_checkpoint_state* state,
                                                        const char* name, int64_t* value);
/** The value as set or loaded into *value (release value->data with c10d_free); *found 0 and
 * value empty when absent.
 * \param state the state.
 * \param name the value's name.
 * \param[out] value the bytes, allocated by the library (c10d_free value->data); data NULL and
 *        size 0 when absent.
 * \param[out] found 1 when the value exists, else 0.
 * \return C10D_OK, also when absent; C10D_ERR_INVALID_ARGUMENT for a NULL argument. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_get_value(const c10d_checkpoint_state* state,
                                                          const char* name, c10d_bytes* value,
                                                          int* found);

/** Collectives over group (NULL: this process alone).
 * This one writes state to dir from every rank and returns once the checkpoint is committed.
 * \param state the state to save; its buffers are read during the call.
 * \param dir the checkpoint's folder, the same on every rank (not ending in ".partial" or
 *        ".old").
 * \param group the group that saves together, or NULL.
 * \param options how to write (the same on every rank); NULL: the defaults.
 * \return C10D_OK; C10D_ERR_CHECKPOINT when it cannot be written or dir holds a checkpoint
 *         already (without overwrite); C10D_ERR_INVALID_ARGUMENT for a NULL state or dir, a bad
 *         dir or options, or a state the ranks disagree about (naming the tensor and ranks); the
 *         group's errors. Every rank fails when any does. */
C10D_C_EXPORT c10d_status c10d_checkpoint_save(const c10d_checkpoint_state* state, const char* dir,
                                               c10d_group* group,
                                               const c10d_checkpoint_save_options* options);
/** Fills state's tensors and values from dir, at any world size and slicing (collective over
 * group, or this process alone with NULL).
 * \param state the state to fill; its buffers are written during the call.
 * \param dir the checkpoint's folder, the same on every rank.
 * \param group the group that loads together, or NULL.
 * \param options what to accept; NULL: the defaults.
 * \return C10D_OK; C10D_ERR_CHECKPOINT for a checkpoint that is incomplete, damaged or does not
 *         match the state (also a tensor another rank gives another dtype or shape);
 *         C10D_ERR_INVALID_ARGUMENT for a NULL state or dir, or bad options; the group's errors.
 *         Every rank fails when any does. */
C10D_C_EXPORT c10d_status c10d_checkpoint_load(c10d_checkpoint_state* state, const char* dir,
                                               c10d_group* group,
                                               const c10d_checkpoint_load_options* options);

/** Saves in the background (AsyncSaver): new is collective over group; save returns once the
 * state's buffers are copied, and the next save or wait returns a failed save's error.
 * \param group the group that saves together (not NULL); the saver keeps it alive.
 * \param refuse_while_busy nonzero: a save while the previous one still runs on any rank fails
 *        with C10D_ERR_STATE (on every rank); 0: it waits for it.
 * \param[out] saver the saver; the caller frees it with c10d_checkpoint_saver_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group or saver; the group's errors. */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_new(c10d_group* group, int refuse_while_busy,
                                                    c10d_checkpoint_saver** saver);
/** Starts a save of state to dir in the background (collective over the saver's group); returns
 * once the state's buffers are copied.
 * \param saver the saver.
 * \param state the state to save; its buffers are read until this returns.
 * \param dir the checkpoint's folder, as for c10d_checkpoint_save.
 * \param options how to write; NULL: the defaults.
 * \return C10D_OK once started; the previous save's error; C10D_ERR_STATE with
 *         refuse_while_busy while it runs; C10D_ERR_INVALID_ARGUMENT for a NULL argument or bad
 *         options; an error of one rank's staging on every rank. */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_save(c10d_checkpoint_saver* saver,
                                                     const c10d_checkpoint_state* state,
                                                     const char* dir,
                                                     const c10d_checkpoint_save_options* options);
/** *done: 1 when no save is running (its outcome is then what wait returns at once).
 * \param saver the saver.
 * \param[out] done 1 when no save is running, else 0.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when saver or done is NULL. */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_done(c10d_checkpoint_saver* saver, int* done);
/** Waits for the save in flight, if any, and returns its outcome (an error once).
 * \param saver the saver.
 * \return C10D_OK; the save's error (C10D_ERR_CHECKPOINT, ... as c10d_checkpoint_save);
 *         C10D_ERR_INVALID_ARGUMENT when saver is NULL. */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_wait(c10d_checkpoint_saver* saver);
/** Waits for a save in flight.
 * Then releases the saver; a save's error nobody waited for is logged, not returned (call
 * c10d_checkpoint_saver_wait first to see it).
 * \param saver the saver, or NULL (ignored). */
C10D_C_EXPORT void c10d_checkpoint_saver_free(c10d_checkpoint_saver* saver);

/** The newest complete checkpoint under root into *path (c10d_free it); *found 0 when none.
 * Newest: by the value "step" when every checkpoint has it as an integer, else by commit time.
 * \param root the folder holding checkpoints.
 * \param[out] path the checkpoint's folder, NUL-terminated (size without the NUL): c10d_free
 *        path->data; data NULL and size 0 when none.
 * \param[out] found 1 when there is one, else 0.
 * \return C10D_OK, also when none (or root does not exist); C10D_ERR_INVALID_ARGUMENT for a NULL
 *         argument; C10D_ERR_CHECKPOINT when root exists but cannot be listed. */
C10D_C_EXPORT c10d_status c10d_checkpoint_latest(const char* root, c10d_bytes* path, int* found);
/** Removes all but the newest keep complete checkpoints under root, and partial ones.
 * Call it between saves: a save in flight under root is a partial folder.
 * \param root the folder holding checkpoints.
 * \param keep how many complete checkpoints to keep.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when root is NULL; C10D_ERR_CHECKPOINT when root
 *         cannot be listed or a folder cannot be removed. */
C10D_C_EXPORT c10d_status c10d_checkpoint_keep_last(const char* root, size_t keep);
/** Checks every checksum: *problems their number, *report one line each (c10d_free it).
 * \param dir the checkpoint's folder.
 * \param[out] report what is wrong, one line each naming the tensor, file and byte offset,
 *        NUL-terminated (size without the NUL; "" when sound): c10d_free report->data.
 * \param[out] problems the number of lines.
 * \return C10D_OK, also when problems were found; C10D_ERR_CHECKPOINT when dir is not a
 *         complete checkpoint; C10D_ERR_INVALID_ARGUMENT for a NULL argument. */
C10D_C_EXPORT c10d_status c10d_checkpoint_verify(const char* dir, c10d_bytes* report,
                                                 int* problems);
/** Writes every tensor of dir whole into one safetensors file at out (values in its
 * "__metadata__"), for inference or a program without c10d.
 * \param dir the checkpoint's folder.
 * \param out the file to write; must not exist.
 * \return C10D_OK; C10D_ERR_CHECKPOINT for a checkpoint load would refuse, or an out that
 *         exists; C10D_ERR_INVALID_ARGUMENT when dir or out is NULL. */
C10D_C_EXPORT c10d_status c10d_checkpoint_consolidate(const char* dir, const char* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_CHECKPOINT_H */
