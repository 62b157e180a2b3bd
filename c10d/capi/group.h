/** \file
 * c10d's C API: process groups and device meshes (c10d/capi/c10d.h has the conventions). */
#ifndef C10D_CAPI_GROUP_H
#define C10D_CAPI_GROUP_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- process groups ---- */

typedef struct c10d_init_options {
  size_t struct_size;
  const char* backend;     /**< "gloo", "mpi", "nccl", "cpu:gloo,cuda:nccl"; NULL: C10D_BACKEND */
  const char* init_method; /**< "env://" (NULL), "tcp://host:port", "file:///path" */
  int rank;                /**< -1: RANK, or the launcher's (Open MPI, PMI, Slurm) */
  int world_size;          /**< -1: WORLD_SIZE, or the launcher's */
  int64_t timeout_ms;      /**< 0: C10D_TIMEOUT seconds, else 30 minutes */
  const char* group_name;  /**< NULL: "default" */
} c10d_init_options;
#define C10D_INIT_OPTIONS_INIT \
  { sizeof(c10d_init_options), NULL, NULL, -1, -1, 0, NULL }

typedef struct c10d_group_options {
  size_t struct_size;
  const char* backend;    /**< NULL: "gloo" for c10d_group_create; the parent's for subgroups */
  int64_t timeout_ms;     /**< 0: 30 minutes for c10d_group_create; the parent's for subgroups */
  const char* group_name; /**< NULL: "default"; subgroups are named after their parent instead */
} c10d_group_options;
#define C10D_GROUP_OPTIONS_INIT \
  { sizeof(c10d_group_options), NULL, 0, NULL }

/** The job's rendezvous store alone, as c10d_group_init finds it: env:// and tcp:// connect to the
 * TCP store rank 0 hosts (and return once every rank is there), file:// opens a file store. */
C10D_C_EXPORT c10d_status c10d_store_connect(const c10d_init_options* options, c10d_store** out);
/** The job's default group, as torch.distributed.init_process_group: every rank calls it. */
C10D_C_EXPORT c10d_status c10d_group_init(const c10d_init_options* options, c10d_group** out);
/** A group over a store the caller made; rank and size are this process's place in it. */
C10D_C_EXPORT c10d_status c10d_group_create(c10d_store* store, int rank, int size,
                                            const c10d_group_options* options, c10d_group** out);
/** Subgroups. Every rank of group calls them, in the same order. A rank left out gets a handle
 * whose c10d_group_is_member is 0 (and whose operations fail with C10D_ERR_INVALID_ARGUMENT). */
C10D_C_EXPORT c10d_status c10d_group_new(c10d_group* group, const int* ranks, size_t num_ranks,
                                         const c10d_group_options* options, c10d_group** out);
/** MPI_Comm_split: ranks of one color form a group ordered by key; a negative color: none. */
C10D_C_EXPORT c10d_status c10d_group_split(c10d_group* group, int color, int key,
                                           const c10d_group_options* options, c10d_group** out);
/** torch's new_subgroups: group's ranks cut into consecutive subgroups of group_size; *out is this
 * rank's. C10D_ERR_INVALID_ARGUMENT when group_size does not divide the group's size. */
C10D_C_EXPORT c10d_status c10d_group_new_subgroups(c10d_group* group, int group_size,
                                                   const c10d_group_options* options,
                                                   c10d_group** out);
/** torch's new_subgroups_by_enumeration: num_subgroups lists of group's ranks, list i being
 * sizes[i] ranks of ranks (the lists one after another). *out is the subgroup this rank is in,
 * NULL when it is in none. A rank outside the group or in two lists is refused, naming it. */
C10D_C_EXPORT c10d_status c10d_group_new_subgroups_by_enumeration(
    c10d_group* group, const int* ranks, const size_t* sizes, size_t num_subgroups,
    const c10d_group_options* options, c10d_group** out);
/** The process's default group (the last c10d_group_init's while its handle lives), as a new
 * handle; C10D_ERR_STATE when there is none. */
C10D_C_EXPORT c10d_status c10d_group_default(c10d_group** out);
/** The store the group was created over (for RPC, or keys of the program's own), as a new handle. */
C10D_C_EXPORT c10d_status c10d_group_store(c10d_group* group, c10d_store** out);
C10D_C_EXPORT int c10d_group_rank(const c10d_group* group);
C10D_C_EXPORT int c10d_group_size(const c10d_group* group);
C10D_C_EXPORT int c10d_group_is_member(const c10d_group* group);
/** The backend spec the group runs ("gloo", "cpu:gloo,cuda:nccl"); valid while group is. */
C10D_C_EXPORT const char* c10d_group_backend(const c10d_group* group);
/** Stops the group's backends without waiting for peers: operations in flight fail with
 * C10D_ERR_STATE, later ones too. Idempotent. The handle still needs c10d_group_free. */
C10D_C_EXPORT c10d_status c10d_group_shutdown(c10d_group* group);
C10D_C_EXPORT void c10d_group_free(c10d_group* group);

/* ---- device mesh (torch's init_device_mesh) ---- */
typedef struct c10d_device_mesh c10d_device_mesh;
/** group's ranks as a row-major mesh of ndim dimensions, named by names (NULL: unnamed), with a
 * subgroup per dimension for this rank. Every rank of group calls it alike. A shape that does not
 * multiply to the group's size, or names that repeat, are refused on every rank. */
C10D_C_EXPORT c10d_status c10d_device_mesh_init(c10d_group* group, const int* shape,
                                                const char* const* names, size_t ndim,
                                                c10d_device_mesh** out);
/** The subgroup of dimension dim (the ranks that differ from this one only there), a new handle. */
C10D_C_EXPORT c10d_status c10d_device_mesh_group(c10d_device_mesh* mesh, size_t dim,
                                                 c10d_group** out);
/** The dimension called name; C10D_ERR_INVALID_ARGUMENT naming the known ones otherwise. */
C10D_C_EXPORT c10d_status c10d_device_mesh_dim(c10d_device_mesh* mesh, const char* name,
                                               size_t* dim);
/** This rank's coordinate: ndim entries written to coordinate. */
C10D_C_EXPORT c10d_status c10d_device_mesh_coordinate(c10d_device_mesh* mesh, int* coordinate);
C10D_C_EXPORT void c10d_device_mesh_free(c10d_device_mesh* mesh);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_GROUP_H */
