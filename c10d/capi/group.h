/** \file
 * c10d's C API: process groups and device meshes (c10d/capi/c10d.h has the conventions). */
#ifndef C10D_CAPI_GROUP_H
#define C10D_CAPI_GROUP_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- process groups ---- */

/** How c10d_store_connect and c10d_group_init find the job (torch's init_process_group): start
 * from C10D_INIT_OPTIONS_INIT. */
typedef struct c10d_init_options {
  size_t struct_size;      /**< sizeof(c10d_init_options), as C10D_INIT_OPTIONS_INIT sets */
  const char* backend;     /**< "gloo", "mpi", "nccl", "cpu:gloo,cuda:nccl"; NULL: C10D_BACKEND */
  const char* init_method; /**< "env://" (NULL), "tcp://host:port", "file:///path" */
  int rank;                /**< -1: RANK, or the launcher's (Open MPI, PMI, Slurm) */
  int world_size;          /**< -1: WORLD_SIZE, or the launcher's */
  int64_t timeout_ms;      /**< 0: C10D_TIMEOUT seconds, else 30 minutes */
  const char* group_name;  /**< NULL: "default" */
} c10d_init_options;
/** The defaults of c10d_init_options: everything from the environment. */
#define C10D_INIT_OPTIONS_INIT \
  { sizeof(c10d_init_options), NULL, NULL, -1, -1, 0, NULL }

/** A group's settings, for c10d_group_create and the subgroup calls: start from
 * C10D_GROUP_OPTIONS_INIT. A subgroup given neither a backend nor a timeout takes all its
 * parent's options. */
typedef struct c10d_group_options {
  size_t struct_size;     /**< sizeof(c10d_group_options), as C10D_GROUP_OPTIONS_INIT sets */
  const char* backend;    /**< NULL: "gloo" for c10d_group_create; the parent's for subgroups */
  int64_t timeout_ms;     /**< 0: 30 minutes for c10d_group_create; the parent's for subgroups */
  const char* group_name; /**< NULL: "default"; subgroups are named after their parent instead */
} c10d_group_options;
/** The defaults of c10d_group_options. */
#define C10D_GROUP_OPTIONS_INIT \
  { sizeof(c10d_group_options), NULL, 0, NULL }

/** The job's rendezvous store alone, as c10d_group_init finds it: env:// and tcp:// connect to the
 * TCP store rank 0 hosts (and return once every rank is there), file:// opens a file store.
 * \param options the job's options; NULL: the defaults (all from the environment).
 * \param[out] out the store; the caller frees it with c10d_store_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL out, a wrong struct_size, a negative
 *         timeout, a bad init method, or a rank, world size or MASTER_ADDR/MASTER_PORT that is
 *         neither given nor found (named); C10D_ERR_TIMEOUT when the other ranks do not come
 *         within the timeout; C10D_ERR_STORE when the store fails. */
C10D_C_EXPORT c10d_status c10d_store_connect(const c10d_init_options* options, c10d_store** out);
/** The job's default group, as torch.distributed.init_process_group: every rank calls it.
 * It becomes the process's default group (c10d_group_default) while a handle to it lives.
 * \param options the job's options; NULL: the defaults (all from the environment).
 * \param[out] out the group; the caller frees it with c10d_group_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT as c10d_store_connect, and for an unknown backend;
 *         C10D_ERR_TIMEOUT when the other ranks do not come within the timeout; C10D_ERR_STORE or
 *         C10D_ERR_BACKEND when the store or a backend fails. */
C10D_C_EXPORT c10d_status c10d_group_init(const c10d_init_options* options, c10d_group** out);
/** A group over a store the caller made; rank and size are this process's place in it.
 * Every rank of the group calls it, over the same store.
 * \param store the store the ranks meet through (the group keeps it alive).
 * \param rank this process's rank, in [0, size).
 * \param size the number of ranks, at least 1.
 * \param options the group's settings; NULL: the defaults.
 * \param[out] out the group; the caller frees it with c10d_group_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL store or out, a bad rank, size or
 *         backend spec, a wrong struct_size or a negative timeout; the backends' errors
 *         (C10D_ERR_TIMEOUT while peers connect, C10D_ERR_BACKEND, C10D_ERR_STORE). */
C10D_C_EXPORT c10d_status c10d_group_create(c10d_store* store, int rank, int size,
                                            const c10d_group_options* options, c10d_group** out);
/** Subgroups. Every rank of group calls them, in the same order. A rank left out gets a handle
 * whose c10d_group_is_member is 0 (and whose operations fail with C10D_ERR_INVALID_ARGUMENT).
 * This one makes a group of the listed ranks of group; the new group's rank i is ranks[i].
 * \param group the parent group.
 * \param ranks num_ranks distinct ranks of group.
 * \param num_ranks how many ranks, at least 1.
 * \param options the new group's backend and timeout; NULL: the parent's.
 * \param[out] out the new group, or the non-member's handle; free it with c10d_group_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, an empty list, a repeated or
 *         out-of-range rank, or ranks whose group creations do not match; C10D_ERR_TIMEOUT
 *         naming the ranks that did not take part within the group's timeout. */
C10D_C_EXPORT c10d_status c10d_group_new(c10d_group* group, const int* ranks, size_t num_ranks,
                                         const c10d_group_options* options, c10d_group** out);
/** MPI_Comm_split: ranks of one color form a group ordered by key; a negative color: none.
 * Collective over group, as c10d_group_new.
 * \param group the parent group.
 * \param color the group this rank joins; negative: none (out is the non-member's handle).
 * \param key this rank's place among the ranks of its color (lower first, then by rank).
 * \param options the new group's backend and timeout; NULL: the parent's.
 * \param[out] out this rank's new group, or the non-member's handle; free it with
 *        c10d_group_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group or out, or bad options;
 *         C10D_ERR_TIMEOUT when ranks do not take part within the group's timeout. */
C10D_C_EXPORT c10d_status c10d_group_split(c10d_group* group, int color, int key,
                                           const c10d_group_options* options, c10d_group** out);
/** torch's new_subgroups: group's ranks cut into consecutive subgroups of group_size; *out is this
 * rank's. C10D_ERR_INVALID_ARGUMENT when group_size does not divide the group's size.
 * \param group the parent group.
 * \param group_size ranks per subgroup: positive, dividing the group's size.
 * \param options the subgroups' backend and timeout; NULL: the parent's.
 * \param[out] out this rank's subgroup; free it with c10d_group_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group or out, or a group_size that is
 *         not positive or does not divide the group's size; C10D_ERR_TIMEOUT as
 *         c10d_group_new. */
C10D_C_EXPORT c10d_status c10d_group_new_subgroups(c10d_group* group, int group_size,
                                                   const c10d_group_options* options,
                                                   c10d_group** out);
/** torch's new_subgroups_by_enumeration: num_subgroups lists of group's ranks, list i being
 * sizes[i] ranks of ranks (the lists one after another). *out is the subgroup this rank is in,
 * NULL when it is in none. A rank outside the group or in two lists is refused, naming it.
 * \param group the parent group.
 * \param ranks the lists' ranks, one list after another (sum of sizes entries).
 * \param sizes num_subgroups list lengths, each at least 1.
 * \param num_subgroups how many lists.
 * \param options the subgroups' backend and timeout; NULL: the parent's.
 * \param[out] out this rank's subgroup (free it with c10d_group_free), or NULL.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, an empty list, or a rank
 *         outside the group or in two lists; C10D_ERR_TIMEOUT as c10d_group_new. */
C10D_C_EXPORT c10d_status c10d_group_new_subgroups_by_enumeration(
    c10d_group* group, const int* ranks, const size_t* sizes, size_t num_subgroups,
    const c10d_group_options* options, c10d_group** out);
/** The process's default group (the last c10d_group_init's while its handle lives), as a new
 * handle; C10D_ERR_STATE when there is none.
 * \param[out] out the group; the caller frees it with c10d_group_free.
 * \return C10D_OK; C10D_ERR_STATE when there is no default group; C10D_ERR_INVALID_ARGUMENT
 *         when out is NULL. */
C10D_C_EXPORT c10d_status c10d_group_default(c10d_group** out);
/** The store the group was created over (for RPC, or keys of the program's own), as a new handle.
 * \param group the group.
 * \param[out] out the store; the caller frees it with c10d_store_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL group or out, or a non-member's handle
 *         (which has no store). */
C10D_C_EXPORT c10d_status c10d_group_store(c10d_group* group, c10d_store** out);
/** This process's rank in the group.
 * \param group the group.
 * \return the rank, in [0, size); -1 for a non-member's handle or a NULL group. */
C10D_C_EXPORT int c10d_group_rank(const c10d_group* group);
/** The number of ranks in the group.
 * \param group the group.
 * \return the group's size; 0 for a non-member's handle or a NULL group. */
C10D_C_EXPORT int c10d_group_size(const c10d_group* group);
/** Whether this process is a member of the group (a rank left out of a subgroup is not).
 * \param group the group.
 * \return 1 for a member; 0 for a non-member's handle or a NULL group. */
C10D_C_EXPORT int c10d_group_is_member(const c10d_group* group);
/** The backend spec the group runs ("gloo", "cpu:gloo,cuda:nccl"); valid while group is.
 * \param group the group.
 * \return the spec, owned by the group; "" for a non-member's handle or a NULL group. */
C10D_C_EXPORT const char* c10d_group_backend(const c10d_group* group);
/** Stops the group's backends without waiting for peers: operations in flight fail with
 * C10D_ERR_STATE, later ones too. Idempotent. The handle still needs c10d_group_free.
 * \param group the group.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when group is NULL. */
C10D_C_EXPORT c10d_status c10d_group_shutdown(c10d_group* group);
/** Releases the handle, as its last use. The group shuts down once nothing holds it any more (no
 * handle, and no work or reducer over it).
 * \param group the handle, or NULL (ignored). */
C10D_C_EXPORT void c10d_group_free(c10d_group* group);

/* ---- device mesh (torch's init_device_mesh) ---- */
/** A device mesh handle: free it with c10d_device_mesh_free. */
typedef struct c10d_device_mesh c10d_device_mesh;
/** group's ranks as a row-major mesh of ndim dimensions, named by names (NULL: unnamed), with a
 * subgroup per dimension for this rank. Every rank of group calls it alike. A shape that does not
 * multiply to the group's size, or names that repeat, are refused on every rank.
 * \param group the parent group.
 * \param shape ndim dimension sizes, each at least 1.
 * \param names ndim distinct, non-empty names, or NULL.
 * \param ndim the number of dimensions, at least 1.
 * \param[out] out the mesh; the caller frees it with c10d_device_mesh_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, an empty or bad shape, or bad
 *         names; the subgroups' errors (C10D_ERR_TIMEOUT as c10d_group_new). */
C10D_C_EXPORT c10d_status c10d_device_mesh_init(c10d_group* group, const int* shape,
                                                const char* const* names, size_t ndim,
                                                c10d_device_mesh** out);
/** The subgroup of dimension dim (the ranks that differ from this one only there), a new handle.
 * \param mesh the mesh.
 * \param dim the dimension, in [0, ndim).
 * \param[out] out the subgroup; the caller frees it with c10d_group_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL mesh or out, or dim out of range. */
C10D_C_EXPORT c10d_status c10d_device_mesh_group(c10d_device_mesh* mesh, size_t dim,
                                                 c10d_group** out);
/** The dimension called name; C10D_ERR_INVALID_ARGUMENT naming the known ones otherwise.
 * \param mesh the mesh.
 * \param name the dimension's name.
 * \param[out] dim its index.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or an unknown name. */
C10D_C_EXPORT c10d_status c10d_device_mesh_dim(c10d_device_mesh* mesh, const char* name,
                                               size_t* dim);
/** This rank's coordinate: ndim entries written to coordinate.
 * \param mesh the mesh.
 * \param[out] coordinate room for the mesh's ndim ints: this rank's index along each dimension.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when mesh or coordinate is NULL. */
C10D_C_EXPORT c10d_status c10d_device_mesh_coordinate(c10d_device_mesh* mesh, int* coordinate);
/** Releases the mesh; subgroup handles taken from it stay valid.
 * \param mesh the mesh, or NULL (ignored). */
C10D_C_EXPORT void c10d_device_mesh_free(c10d_device_mesh* mesh);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_GROUP_H */
