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
typedef struct c10d_elastic c10d_elastic;

typedef struct c10d_elastic_options {
  size_t struct_size;
  const char* backend;     /**< NULL: C10D_BACKEND, else "gloo" */
  int64_t timeout_ms;      /**< each generation's op timeout; 0: C10D_TIMEOUT (30 minutes) */
  const char* group_name;  /**< NULL: "default"; also names the store keys */
  int min_size;            /**< fewer members after a loss fail reform; 0: 1 */
  int64_t join_timeout_ms; /**< how long reform waits for a member neither here nor dead; 0: 10 s */
} c10d_elastic_options;
#define C10D_ELASTIC_OPTIONS_INIT \
  { sizeof(c10d_elastic_options), NULL, 0, NULL, 0, 0 }

/** What a reform or join changed (c10d_elastic_members gives the ids). */
typedef struct c10d_reformation {
  size_t struct_size;
  uint64_t generation;
  int64_t step;      /**< the committed step every member is at */
  int healed;        /**< this rank received the state from a member ahead */
  size_t num_lost;   /**< ids of the old generation not in the new one */
  size_t num_joined; /**< restarted processes admitted */
  double seconds;
} c10d_reformation;
#define C10D_REFORMATION_INIT \
  { sizeof(c10d_reformation), 0, 0, 0, 0, 0, 0.0 }

/** Rank, size and store from the environment (as c10d_group_init). */
C10D_C_EXPORT c10d_status c10d_elastic_from_env(const c10d_elastic_options* options,
                                                c10d_elastic** out);
C10D_C_EXPORT void c10d_elastic_free(c10d_elastic* elastic);
/** The current generation's group as a new handle (c10d_group_free it). After a reform it is
 * shut down: its operations fail with C10D_ERR_STATE; take the new one. */
C10D_C_EXPORT c10d_status c10d_elastic_group(c10d_elastic* elastic, c10d_group** out);
/** *committed 1 when every rank passed ok != 0 and the agreement succeeded; 0: reform. */
C10D_C_EXPORT c10d_status c10d_elastic_commit(c10d_elastic* elastic, int ok, int* committed);
/** 1 on every member, from the commit that saw it, when a restarted process asks to join. */
C10D_C_EXPORT int c10d_elastic_joins_pending(const c10d_elastic* elastic);
/** Re-forms from the live members and the processes asking to join, and heals state (NULL: none;
 * members at different steps then fail with C10D_ERR_STATE). C10D_ERR_STATE when this rank was
 * left out or fewer than min_size remain. */
C10D_C_EXPORT c10d_status c10d_elastic_reform(c10d_elastic* elastic, c10d_checkpoint_state* state,
                                              c10d_reformation* out);
/** A restarted process: waits to be admitted, then receives state. Others: returns at once. */
C10D_C_EXPORT c10d_status c10d_elastic_join(c10d_elastic* elastic, c10d_checkpoint_state* state,
                                            c10d_reformation* out);
/** The current members' ids by rank into ids[capacity]; *count their number. */
C10D_C_EXPORT c10d_status c10d_elastic_members(const c10d_elastic* elastic, int* ids,
                                               size_t capacity, size_t* count);
C10D_C_EXPORT int c10d_elastic_id(const c10d_elastic* elastic);
C10D_C_EXPORT int64_t c10d_elastic_step(const c10d_elastic* elastic);
C10D_C_EXPORT uint64_t c10d_elastic_generation(const c10d_elastic* elastic);
C10D_C_EXPORT int64_t c10d_elastic_incarnation(const c10d_elastic* elastic);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_ELASTIC_H */
