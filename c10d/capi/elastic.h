/** \file
 * c10d's C API: recovery, training through a rank's death (c10d/capi/c10d.h has the conventions).
 */
#ifndef C10D_CAPI_ELASTIC_H
#define C10D_CAPI_ELASTIC_H

#include "checkpoint.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- recovery (c10d/elastic/ElasticGroup.hpp, docs/elastic.md) ----
 * A group that survives the loss of ranks: after a failed step the survivors call
 * c10d_elastic_reform and go on in a new generation; a process c10drun --max-restarts started
 * again calls c10d_elastic_join once, and the members admit it at a step boundary. One thread
 * drives a c10d_elastic. */
/** An elastic group handle: free it with c10d_elastic_free. */
typedef struct c10d_elastic c10d_elastic;

/** The elastic group's settings: start from C10D_ELASTIC_OPTIONS_INIT. */
typedef struct c10d_elastic_options {
  size_t struct_size;      /**< sizeof(c10d_elastic_options), as C10D_ELASTIC_OPTIONS_INIT sets */
  const char* backend;     /**< NULL: C10D_BACKEND, else "gloo" */
  int64_t timeout_ms;      /**< each generation's op timeout; 0: C10D_TIMEOUT (30 minutes) */
  const char* group_name;  /**< NULL: "default"; also names the store keys */
  int min_size;            /**< fewer members after a loss fail reform; 0: 1 */
  int64_t join_timeout_ms; /**< how long reform waits for a member neither here nor dead; 0: 10 s */
} c10d_elastic_options;
/** The defaults of c10d_elastic_options: every field 0 or NULL. */
#define C10D_ELASTIC_OPTIONS_INIT \
  { sizeof(c10d_elastic_options), NULL, 0, NULL, 0, 0 }

/** What a reform or join changed (c10d_elastic_members gives the ids). */
typedef struct c10d_reformation {
  size_t struct_size;  /**< sizeof(c10d_reformation), as C10D_REFORMATION_INIT sets */
  uint64_t generation; /**< the generation now current */
  int64_t step;        /**< the committed step every member is at */
  int healed;          /**< this rank received the state from a member ahead */
  size_t num_lost;     /**< ids of the old generation not in the new one */
  size_t num_joined;   /**< restarted processes admitted */
  double seconds;      /**< the call's own time on this rank, in seconds */
} c10d_reformation;
/** An empty c10d_reformation with its struct_size set, for c10d_elastic_reform and join to fill. */
#define C10D_REFORMATION_INIT \
  { sizeof(c10d_reformation), 0, 0, 0, 0, 0, 0.0 }

/** Rank, size and store from the environment (as c10d_group_init).
 * This is generation 0; a restarted process has no group until c10d_elastic_join.
 * \param options the settings; NULL: the defaults.
 * \param[out] out the elastic group; the caller frees it with c10d_elastic_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL out, a wrong struct_size, a negative
 *         field, a min_size above the world size, or the environment's problems (as
 *         c10d_group_init); C10D_ERR_TIMEOUT, C10D_ERR_STORE or C10D_ERR_BACKEND as
 *         c10d_group_init. */
C10D_C_EXPORT c10d_status c10d_elastic_from_env(const c10d_elastic_options* options,
                                                c10d_elastic** out);
/** Releases the elastic group and shuts its current group down (group handles taken from it stay
 * valid, their operations failing with C10D_ERR_STATE).
 * \param elastic the handle, or NULL (ignored). */
C10D_C_EXPORT void c10d_elastic_free(c10d_elastic* elastic);
/** The current generation's group as a new handle (c10d_group_free it). After a reform it is
 * shut down: its operations fail with C10D_ERR_STATE; take the new one.
 * \param elastic the elastic group.
 * \param[out] out the group; the caller frees it with c10d_group_free.
 * \return C10D_OK; C10D_ERR_STATE when this rank was left out of a reform, or is a restarted
 *         process that has not joined; C10D_ERR_INVALID_ARGUMENT when elastic or out is NULL. */
C10D_C_EXPORT c10d_status c10d_elastic_group(c10d_elastic* elastic, c10d_group** out);
/** *committed 1 when every rank passed ok != 0 and the agreement succeeded; 0: reform.
 * Collective over the current generation (one small allreduce); a commit advances the step.
 * \param elastic the elastic group.
 * \param ok nonzero when this rank's step succeeded.
 * \param[out] committed 1 when the step is committed; 0 when it is not (call
 *        c10d_elastic_reform).
 * \return C10D_OK, also when the agreement failed; C10D_ERR_STATE when this rank was left out
 *         or has not joined; C10D_ERR_INVALID_ARGUMENT when elastic or committed is NULL. */
C10D_C_EXPORT c10d_status c10d_elastic_commit(c10d_elastic* elastic, int ok, int* committed);
/** 1 on every member, from the commit that saw it, when a restarted process asks to join.
 * The program then calls c10d_elastic_reform at that step boundary.
 * \param elastic the elastic group.
 * \return 1 when a join is pending, else 0 (also for a NULL elastic). */
C10D_C_EXPORT int c10d_elastic_joins_pending(const c10d_elastic* elastic);
/** Re-forms from the live members and the processes asking to join, and heals state (NULL: none;
 * members at different steps then fail with C10D_ERR_STATE). C10D_ERR_STATE when this rank was
 * left out or fewer than min_size remain.
 * \param elastic the elastic group.
 * \param state the state to bring every member to the highest committed step, or NULL.
 * \param[out] out what changed; may be NULL. Its struct_size must be set
 *        (C10D_REFORMATION_INIT).
 * \return C10D_OK; C10D_ERR_STATE when this rank was left out, fewer than min_size remain, or
 *         (without state) members are at different steps; C10D_ERR_STORE when the store is
 *         gone; C10D_ERR_INVALID_ARGUMENT when elastic is NULL or out has a wrong struct_size
 *         (checked first: the call then takes no part in the reform). */
C10D_C_EXPORT c10d_status c10d_elastic_reform(c10d_elastic* elastic, c10d_checkpoint_state* state,
                                              c10d_reformation* out);
/** A restarted process: waits to be admitted, then receives state. Others: returns at once.
 * Call it once, before the first step.
 * \param elastic the elastic group.
 * \param state the state to receive from the members, or NULL.
 * \param[out] out what changed; may be NULL. Its struct_size must be set
 *        (C10D_REFORMATION_INIT).
 * \return C10D_OK; C10D_ERR_TIMEOUT when the members do not admit it in time; C10D_ERR_STATE or
 *         C10D_ERR_STORE as c10d_elastic_reform; C10D_ERR_INVALID_ARGUMENT when elastic is NULL
 *         or out has a wrong struct_size. */
C10D_C_EXPORT c10d_status c10d_elastic_join(c10d_elastic* elastic, c10d_checkpoint_state* state,
                                            c10d_reformation* out);
/** The current members' ids by rank into ids[capacity]; *count their number.
 * \param elastic the elastic group.
 * \param[out] ids room for capacity ids: the first min(capacity, count) are written; may be NULL
 *        when capacity is 0 (to ask for the count).
 * \param capacity the room at ids.
 * \param[out] count the number of members (which may exceed capacity).
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL elastic or count, or NULL ids with a
 *         capacity. */
C10D_C_EXPORT c10d_status c10d_elastic_members(const c10d_elastic* elastic, int* ids,
                                               size_t capacity, size_t* count);
/** This process's id: its rank in generation 0, kept across reforms and restarts.
 * \param elastic the elastic group.
 * \return the id; -1 for a NULL elastic. */
C10D_C_EXPORT int c10d_elastic_id(const c10d_elastic* elastic);
/** The steps this rank committed, or the step healing brought it to.
 * \param elastic the elastic group.
 * \return the step; -1 for a NULL elastic. */
C10D_C_EXPORT int64_t c10d_elastic_step(const c10d_elastic* elastic);
/** The current generation: 0 at the start; each reform raises it (by one per attempt to form a
 * generation).
 * \param elastic the elastic group.
 * \return the generation; 0 for a NULL elastic. */
C10D_C_EXPORT uint64_t c10d_elastic_generation(const c10d_elastic* elastic);
/** This process's incarnation: 0 for one of the first processes, n for one started again after
 * n ends of its id.
 * \param elastic the elastic group.
 * \return the incarnation; -1 for a NULL elastic. */
C10D_C_EXPORT int64_t c10d_elastic_incarnation(const c10d_elastic* elastic);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_ELASTIC_H */
