/* c10d's C API: stores, process groups, collectives, point-to-point and their Work, RPC, for
 * programs and language bindings (Rust, Julia, Go, Java, Python's ctypes) that link C.
 *
 * Plain C99; no C++ type or exception crosses this header. Link c10d::c (libc10d_c.so.1): it
 * exports only c10d_* symbols, and its soname changes when this ABI does.
 *
 * Errors: every call returns a c10d_status. On failure, c10d_last_error() returns the same text
 * the C++ library's exception carries (what failed, where: rank, peer, key, op, tag, and what to
 * do). It is thread-local and stays valid until the calling thread's next failing c10d call.
 *
 * Handles (c10d_store, c10d_group, c10d_work, c10d_rpc, c10d_rpc_future, c10d_rpc_message) are
 * opaque; each is released with its own *_free call, exactly once. A group keeps its store alive
 * and a work keeps its group alive, so they may be freed in any order.
 *
 * Option structs carry their size in their first field, so that later versions can add fields
 * without breaking callers built against this one: start from the *_INIT macro, then set what
 * you need. A NULL options pointer means the defaults.
 *
 * Threading: every call may be made from any thread; a store, group, work or RPC agent may be used
 * by several threads at once, except that *_free must be the handle's last use and
 * c10d_store_set_timeout must not race the store's other calls. An RPC message is one thread's at
 * a time; a reducer follows the C++ one (c10d_ddp_mark_grad_ready from any thread, its other
 * calls from one). Completion callbacks and RPC functions run on library threads (a callback at
 * once on the caller's, for a work that has already completed): they must not free or shut down
 * a group or an agent, whose threads they run on.
 *
 * Buffers: a c10d_buffer describes `count` contiguous elements of `dtype` at `data` on a device.
 * Operations read and write them in place (zero copy); the memory must stay valid until the
 * operation's work has completed. For CUDA memory, `stream` is the cudaStream_t the data is
 * produced and consumed on: the operation is ordered after the work queued on it (NULL: the
 * legacy default stream). */
#ifndef C10D_CAPI_C10D_H
#define C10D_CAPI_C10D_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define C10D_C_EXPORT __attribute__((visibility("default")))
#else
#define C10D_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this API: what c10d_api_version() of the library linked at run time returns,
 * at least. Raised when calls or fields are added; the soname changes when any is removed. */
#define C10D_API_VERSION 4
/* The number in libc10d_c's soname (libc10d_c.so.1): raised only when a call or field is removed
 * or changed, which breaks programs built before. */
#define C10D_ABI_VERSION 1

typedef enum c10d_status {
  C10D_OK = 0,
  C10D_ERR_INVALID_ARGUMENT = 1, /* the caller passed something the call cannot accept */
  C10D_ERR_TIMEOUT = 2,          /* a blocking call ran past its deadline */
  C10D_ERR_STORE = 3,            /* the store is unreachable, failed, or spoke another protocol */
  C10D_ERR_BACKEND = 4,          /* the communication backend failed the operation */
  C10D_ERR_REMOTE = 5,           /* a remote call failed on the callee */
  C10D_ERR_STATE = 6,            /* the group, agent or work was shut down or released */
  C10D_ERR_INTERNAL = 7,         /* anything else; c10d_last_error() says what */
  C10D_ERR_CHECKPOINT = 8        /* a checkpoint that cannot be written or used (see below) */
} c10d_status;

/* Element types (the order of the C++ c10d::ScalarType). */
typedef enum c10d_dtype {
  C10D_FLOAT32 = 0,
  C10D_FLOAT64 = 1,
  C10D_FLOAT16 = 2,
  C10D_BFLOAT16 = 3,
  C10D_INT8 = 4,
  C10D_INT16 = 5,
  C10D_INT32 = 6,
  C10D_INT64 = 7,
  C10D_UINT8 = 8,
  C10D_BOOL = 9
} c10d_dtype;

typedef enum c10d_reduce_op {
  C10D_SUM = 0,
  C10D_AVG = 1,
  C10D_PRODUCT = 2,
  C10D_MIN = 3,
  C10D_MAX = 4,
  C10D_BAND = 5,
  C10D_BOR = 6,
  C10D_BXOR = 7,
  C10D_PREMUL_SUM = 8 /* sum of each input times c10d_op_options.premul_factor */
} c10d_reduce_op;

typedef enum c10d_device_type { C10D_DEVICE_CPU = 0, C10D_DEVICE_CUDA = 1 } c10d_device_type;

typedef struct c10d_buffer {
  void* data;
  int64_t count; /* elements, not bytes */
  c10d_dtype dtype;
  c10d_device_type device_type;
  int device_index; /* CUDA device ordinal; 0 for CPU */
  void* stream;     /* CUDA: the cudaStream_t to order after; must be NULL for CPU */
} c10d_buffer;

typedef struct c10d_store c10d_store;
typedef struct c10d_group c10d_group;
typedef struct c10d_work c10d_work;
struct DLManagedTensor; /* <dlpack/dlpack.h> */

/* Bytes the library allocated for the caller (store values); release data with c10d_free. */
typedef struct c10d_bytes {
  void* data;
  size_t size;
} c10d_bytes;

/* ---- library ---- */

C10D_C_EXPORT int c10d_api_version(void);
/* The failing call's message on this thread ("" when none failed yet). */
C10D_C_EXPORT const char* c10d_last_error(void);
/* "C10D_ERR_TIMEOUT" for C10D_ERR_TIMEOUT; "unknown status" for values not listed above. */
C10D_C_EXPORT const char* c10d_status_name(c10d_status status);
/* "float32", "bfloat16"... (NULL for values not listed above) and the size of one element. */
C10D_C_EXPORT const char* c10d_dtype_name(c10d_dtype dtype);
C10D_C_EXPORT size_t c10d_dtype_size(c10d_dtype dtype);
/* Releases what the library allocated for the caller (c10d_bytes.data); NULL is ignored. */
C10D_C_EXPORT void c10d_free(void* data);
/* Writes message as the error file a launcher names in TORCHELASTIC_ERROR_FILE (torchrun, c10drun),
 * whose failure summary then shows it. *written: 1, or 0 when no launcher named a file. Call it
 * before exiting with an error; c10d_group_init already arranges it for uncaught C++ errors. */
C10D_C_EXPORT c10d_status c10d_write_error_file(const char* message, int* written);

/* ---- stores ---- */

typedef struct c10d_tcp_store_options {
  size_t struct_size;
  const char* host;   /* the server's address; the server itself listens on every address */
  uint16_t port;      /* 0 with is_server: any free port (c10d_store_port tells which) */
  int is_server;      /* nonzero: this process hosts the store */
  int num_workers;    /* with wait_for_workers: how many clients the server waits for, or -1 */
  int64_t timeout_ms; /* default timeout of blocking calls, and of connecting */
  int wait_for_workers;
} c10d_tcp_store_options;
#define C10D_TCP_STORE_OPTIONS_INIT \
  { sizeof(c10d_tcp_store_options), "127.0.0.1", 0, 0, -1, 300000, 0 }

C10D_C_EXPORT c10d_status c10d_store_tcp(const c10d_tcp_store_options* options, c10d_store** out);
/* A store in a file that every rank opens by path (num_workers: how many will, or -1). */
C10D_C_EXPORT c10d_status c10d_store_file(const char* path, int num_workers, int64_t timeout_ms,
                                          c10d_store** out);
/* A store inside this process (ranks as threads, tests). */
C10D_C_EXPORT c10d_status c10d_store_hash(c10d_store** out);
/* Keys of base under prefix + "/". base stays usable and may be freed before the result. */
C10D_C_EXPORT c10d_status c10d_store_prefix(const char* prefix, c10d_store* base, c10d_store** out);
/* The port a TCP store's server listens on, or the port a client connected to. */
C10D_C_EXPORT c10d_status c10d_store_port(c10d_store* store, uint16_t* port);

C10D_C_EXPORT c10d_status c10d_store_set(c10d_store* store, const char* key, const void* value,
                                         size_t size);
/* Waits up to timeout_ms (-1: the store's timeout) for key; value->data is for c10d_free. */
C10D_C_EXPORT c10d_status c10d_store_get(c10d_store* store, const char* key, int64_t timeout_ms,
                                         c10d_bytes* value);
C10D_C_EXPORT c10d_status c10d_store_add(c10d_store* store, const char* key, int64_t delta,
                                         int64_t* result);
/* PyTorch's compare_set: sets desired when key's value is expected (or key is absent and expected
 * is empty); result is the value key has afterwards (expected when absent). */
C10D_C_EXPORT c10d_status c10d_store_compare_set(c10d_store* store, const char* key,
                                                 const void* expected, size_t expected_size,
                                                 const void* desired, size_t desired_size,
                                                 c10d_bytes* result);
/* Waits up to timeout_ms (-1: the store's timeout) until every key exists. */
C10D_C_EXPORT c10d_status c10d_store_wait(c10d_store* store, const char* const* keys,
                                          size_t num_keys, int64_t timeout_ms);
C10D_C_EXPORT c10d_status c10d_store_check(c10d_store* store, const char* const* keys,
                                           size_t num_keys, int* all_exist);
C10D_C_EXPORT c10d_status c10d_store_delete(c10d_store* store, const char* key, int* existed);
C10D_C_EXPORT c10d_status c10d_store_num_keys(c10d_store* store, int64_t* count);
/* Queues (PyTorch 2.6's queue_push / queue_pop / queue_len): per key, values in first-in
 * first-out order, apart from the key's value; each value is popped once. */
C10D_C_EXPORT c10d_status c10d_store_queue_push(c10d_store* store, const char* key,
                                                const void* value, size_t size);
/* Pops key's front value into value (value->data is for c10d_free). timeout_ms -1: the store's
 * timeout, > 0: waits that long for a value, C10D_ERR_TIMEOUT when none came; 0: no wait, and
 * *popped says whether there was one (popped may be NULL otherwise). */
C10D_C_EXPORT c10d_status c10d_store_queue_pop(c10d_store* store, const char* key,
                                               int64_t timeout_ms, c10d_bytes* value, int* popped);
C10D_C_EXPORT c10d_status c10d_store_queue_len(c10d_store* store, const char* key, int64_t* length);
/* The store's default timeout of blocking calls (what timeout_ms -1 means), and setting it. */
C10D_C_EXPORT c10d_status c10d_store_timeout(c10d_store* store, int64_t* timeout_ms);
C10D_C_EXPORT c10d_status c10d_store_set_timeout(c10d_store* store, int64_t timeout_ms);
C10D_C_EXPORT void c10d_store_free(c10d_store* store);

/* ---- process groups ---- */

typedef struct c10d_init_options {
  size_t struct_size;
  const char* backend;     /* "gloo", "mpi", "nccl", "cpu:gloo,cuda:nccl"; NULL: C10D_BACKEND */
  const char* init_method; /* "env://" (NULL), "tcp://host:port", "file:///path" */
  int rank;                /* -1: RANK, or the launcher's (Open MPI, PMI, Slurm) */
  int world_size;          /* -1: WORLD_SIZE, or the launcher's */
  int64_t timeout_ms;      /* 0: C10D_TIMEOUT seconds, else 30 minutes */
  const char* group_name;  /* NULL: "default" */
} c10d_init_options;
#define C10D_INIT_OPTIONS_INIT \
  { sizeof(c10d_init_options), NULL, NULL, -1, -1, 0, NULL }

typedef struct c10d_group_options {
  size_t struct_size;
  const char* backend;    /* NULL: "gloo" for c10d_group_create; the parent's for subgroups */
  int64_t timeout_ms;     /* 0: 30 minutes for c10d_group_create; the parent's for subgroups */
  const char* group_name; /* NULL: "default"; subgroups are named after their parent instead */
} c10d_group_options;
#define C10D_GROUP_OPTIONS_INIT \
  { sizeof(c10d_group_options), NULL, 0, NULL }

/* The job's rendezvous store alone, as c10d_group_init finds it: env:// and tcp:// connect to the
 * TCP store rank 0 hosts (and return once every rank is there), file:// opens a file store. */
C10D_C_EXPORT c10d_status c10d_store_connect(const c10d_init_options* options, c10d_store** out);
/* The job's default group, as torch.distributed.init_process_group: every rank calls it. */
C10D_C_EXPORT c10d_status c10d_group_init(const c10d_init_options* options, c10d_group** out);
/* A group over a store the caller made; rank and size are this process's place in it. */
C10D_C_EXPORT c10d_status c10d_group_create(c10d_store* store, int rank, int size,
                                            const c10d_group_options* options, c10d_group** out);
/* Subgroups. Every rank of group calls them, in the same order. A rank left out gets a handle
 * whose c10d_group_is_member is 0 (and whose operations fail with C10D_ERR_INVALID_ARGUMENT). */
C10D_C_EXPORT c10d_status c10d_group_new(c10d_group* group, const int* ranks, size_t num_ranks,
                                         const c10d_group_options* options, c10d_group** out);
/* MPI_Comm_split: ranks of one color form a group ordered by key; a negative color: none. */
C10D_C_EXPORT c10d_status c10d_group_split(c10d_group* group, int color, int key,
                                           const c10d_group_options* options, c10d_group** out);
/* torch's new_subgroups: group's ranks cut into consecutive subgroups of group_size; *out is this
 * rank's. C10D_ERR_INVALID_ARGUMENT when group_size does not divide the group's size. */
C10D_C_EXPORT c10d_status c10d_group_new_subgroups(c10d_group* group, int group_size,
                                                   const c10d_group_options* options,
                                                   c10d_group** out);
/* torch's new_subgroups_by_enumeration: num_subgroups lists of group's ranks, list i being
 * sizes[i] ranks of ranks (the lists one after another). *out is the subgroup this rank is in,
 * NULL when it is in none. A rank outside the group or in two lists is refused, naming it. */
C10D_C_EXPORT c10d_status c10d_group_new_subgroups_by_enumeration(
    c10d_group* group, const int* ranks, const size_t* sizes, size_t num_subgroups,
    const c10d_group_options* options, c10d_group** out);
/* The process's default group (the last c10d_group_init's while its handle lives), as a new
 * handle; C10D_ERR_STATE when there is none. */
C10D_C_EXPORT c10d_status c10d_group_default(c10d_group** out);
/* The store the group was created over (for RPC, or keys of the program's own), as a new handle. */
C10D_C_EXPORT c10d_status c10d_group_store(c10d_group* group, c10d_store** out);
C10D_C_EXPORT int c10d_group_rank(const c10d_group* group);
C10D_C_EXPORT int c10d_group_size(const c10d_group* group);
C10D_C_EXPORT int c10d_group_is_member(const c10d_group* group);
/* The backend spec the group runs ("gloo", "cpu:gloo,cuda:nccl"); valid while group is. */
C10D_C_EXPORT const char* c10d_group_backend(const c10d_group* group);
/* Stops the group's backends without waiting for peers: operations in flight fail with
 * C10D_ERR_STATE, later ones too. Idempotent. The handle still needs c10d_group_free. */
C10D_C_EXPORT c10d_status c10d_group_shutdown(c10d_group* group);
C10D_C_EXPORT void c10d_group_free(c10d_group* group);

/* ---- device mesh (torch's init_device_mesh) ---- */
typedef struct c10d_device_mesh c10d_device_mesh;
/* group's ranks as a row-major mesh of ndim dimensions, named by names (NULL: unnamed), with a
 * subgroup per dimension for this rank. Every rank of group calls it alike. A shape that does not
 * multiply to the group's size, or names that repeat, are refused on every rank. */
C10D_C_EXPORT c10d_status c10d_device_mesh_init(c10d_group* group, const int* shape,
                                                const char* const* names, size_t ndim,
                                                c10d_device_mesh** out);
/* The subgroup of dimension dim (the ranks that differ from this one only there), a new handle. */
C10D_C_EXPORT c10d_status c10d_device_mesh_group(c10d_device_mesh* mesh, size_t dim,
                                                 c10d_group** out);
/* The dimension called name; C10D_ERR_INVALID_ARGUMENT naming the known ones otherwise. */
C10D_C_EXPORT c10d_status c10d_device_mesh_dim(c10d_device_mesh* mesh, const char* name,
                                               size_t* dim);
/* This rank's coordinate: ndim entries written to coordinate. */
C10D_C_EXPORT c10d_status c10d_device_mesh_coordinate(c10d_device_mesh* mesh, int* coordinate);
C10D_C_EXPORT void c10d_device_mesh_free(c10d_device_mesh* mesh);

/* ---- operations ----
 * Each takes the group, its buffers, options (NULL: defaults) and `work`: with work NULL the call
 * blocks until the operation completes and returns its status; otherwise it returns once the
 * operation is started and *work is its handle (c10d_work_wait, c10d_work_free). Collectives must
 * be called in the same order on every rank of the group. Ranks are ranks in the group. */

typedef struct c10d_op_options {
  size_t struct_size;
  c10d_reduce_op reduce_op; /* reductions */
  double premul_factor;     /* C10D_PREMUL_SUM's factor */
  int root;                 /* rooted collectives */
  int tag;                  /* point-to-point, >= 0 */
  int64_t timeout_ms;       /* -1: the group's timeout */
} c10d_op_options;
#define C10D_OP_OPTIONS_INIT \
  { sizeof(c10d_op_options), C10D_SUM, 1.0, 0, 0, -1 }

C10D_C_EXPORT c10d_status c10d_broadcast(c10d_group* group, const c10d_buffer* buffer,
                                         const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT c10d_status c10d_allreduce(c10d_group* group, const c10d_buffer* buffer,
                                         const c10d_op_options* options, c10d_work** work);
/* Coalescing (torch's _coalescing_manager): between start and end, the allreduces this thread
 * issues on group are held (a call without a work handle returns at once; a handle's wait fails
 * until the end) and end issues them as one fused allreduce, *work its handle (NULL: waits for
 * it). Only allreduces of one dtype, device and reduce op; anything else is refused with
 * C10D_ERR_INVALID_ARGUMENT and the block goes on. */
C10D_C_EXPORT c10d_status c10d_group_start_coalescing(c10d_group* group);
C10D_C_EXPORT c10d_status c10d_group_end_coalescing(c10d_group* group, c10d_work** work);
/* One collective over several buffers of one dtype and device. */
C10D_C_EXPORT c10d_status c10d_allreduce_coalesced(c10d_group* group, const c10d_buffer* buffers,
                                                   size_t num_buffers,
                                                   const c10d_op_options* options,
                                                   c10d_work** work);
/* The result lands on options->root; the others' buffers are left undefined. */
C10D_C_EXPORT c10d_status c10d_reduce(c10d_group* group, const c10d_buffer* buffer,
                                      const c10d_op_options* options, c10d_work** work);
/* outputs: size() buffers shaped like input; outputs[r] receives rank r's input. */
C10D_C_EXPORT c10d_status c10d_allgather(c10d_group* group, const c10d_buffer* outputs,
                                         size_t num_outputs, const c10d_buffer* input,
                                         const c10d_op_options* options, c10d_work** work);
/* output: size() * input.count elements, rank r's input at r * input.count. */
C10D_C_EXPORT c10d_status c10d_allgather_into(c10d_group* group, const c10d_buffer* output,
                                              const c10d_buffer* input,
                                              const c10d_op_options* options, c10d_work** work);
/* outputs: size() buffers on the root; NULL and 0 on the others. */
C10D_C_EXPORT c10d_status c10d_gather(c10d_group* group, const c10d_buffer* outputs,
                                      size_t num_outputs, const c10d_buffer* input,
                                      const c10d_op_options* options, c10d_work** work);
/* inputs: size() buffers on the root; NULL and 0 on the others. */
C10D_C_EXPORT c10d_status c10d_scatter(c10d_group* group, const c10d_buffer* output,
                                       const c10d_buffer* inputs, size_t num_inputs,
                                       const c10d_op_options* options, c10d_work** work);
/* output = reduction over ranks of their inputs[rank()]; inputs: size() buffers like output. */
C10D_C_EXPORT c10d_status c10d_reduce_scatter(c10d_group* group, const c10d_buffer* output,
                                              const c10d_buffer* inputs, size_t num_inputs,
                                              const c10d_op_options* options, c10d_work** work);
/* input: size() * output.count elements. */
C10D_C_EXPORT c10d_status c10d_reduce_scatter_into(c10d_group* group, const c10d_buffer* output,
                                                   const c10d_buffer* input,
                                                   const c10d_op_options* options,
                                                   c10d_work** work);
/* outputs[r] receives rank r's inputs[rank()]; size() buffers each. */
C10D_C_EXPORT c10d_status c10d_alltoall(c10d_group* group, const c10d_buffer* outputs,
                                        size_t num_outputs, const c10d_buffer* inputs,
                                        size_t num_inputs, const c10d_op_options* options,
                                        c10d_work** work);
/* Flat all-to-all: with NULL splits, equal parts of count / size() elements; otherwise size()
 * element counts each (rank r's part of input goes to rank r; output's parts come in rank
 * order). */
C10D_C_EXPORT c10d_status c10d_alltoall_single(c10d_group* group, const c10d_buffer* output,
                                               const c10d_buffer* input,
                                               const int64_t* output_splits,
                                               const int64_t* input_splits, size_t num_splits,
                                               const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT c10d_status c10d_barrier(c10d_group* group, const c10d_op_options* options,
                                       c10d_work** work);
/* A barrier that names the ranks missing at the deadline (all of them with wait_all). Blocks. */
C10D_C_EXPORT c10d_status c10d_monitored_barrier(c10d_group* group, int64_t timeout_ms,
                                                 int wait_all);

/* Point-to-point: a send meets the receive of the same pair and options->tag; both must have
 * the same size in bytes. */
C10D_C_EXPORT c10d_status c10d_send(c10d_group* group, const c10d_buffer* buffer, int dst,
                                    const c10d_op_options* options, c10d_work** work);
C10D_C_EXPORT c10d_status c10d_recv(c10d_group* group, const c10d_buffer* buffer, int src,
                                    const c10d_op_options* options, c10d_work** work);
/* Receives from whichever rank sends with the tag first: c10d_work_source_rank says which. */
C10D_C_EXPORT c10d_status c10d_recv_any(c10d_group* group, const c10d_buffer* buffer,
                                        const c10d_op_options* options, c10d_work** work);

typedef enum c10d_p2p_kind { C10D_P2P_SEND = 0, C10D_P2P_RECV = 1 } c10d_p2p_kind;
typedef struct c10d_p2p_op {
  c10d_p2p_kind kind;
  c10d_buffer buffer;
  int peer;
  int tag;
} c10d_p2p_op;
/* Starts every op as one batch (NCCL: one group call). works: num_ops handles, or NULL to block
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

/* *out: c10d_group_size(group) c10d_bytes, rank r's at [r]. */
C10D_C_EXPORT c10d_status c10d_all_gather_bytes(c10d_group* group, const void* data, size_t size,
                                                c10d_bytes** out);
/* src's data/size (read on src only) into *out on every rank, src too. */
C10D_C_EXPORT c10d_status c10d_broadcast_bytes(c10d_group* group, const void* data, size_t size,
                                               int src, c10d_bytes* out);
/* On dst *out as in c10d_all_gather_bytes; elsewhere *out NULL. */
C10D_C_EXPORT c10d_status c10d_gather_bytes(c10d_group* group, const void* data, size_t size,
                                            int dst, c10d_bytes** out);
/* pieces: count of them on src, one per rank (NULL and 0 elsewhere); rank r gets src's [r]. */
C10D_C_EXPORT c10d_status c10d_scatter_bytes(c10d_group* group, const c10d_bytes* pieces,
                                             size_t count, int src, c10d_bytes* out);
C10D_C_EXPORT c10d_status c10d_send_bytes(c10d_group* group, const void* data, size_t size, int dst,
                                          int tag);
C10D_C_EXPORT c10d_status c10d_recv_bytes(c10d_group* group, int src, int tag, c10d_bytes* out);

/* ---- work ---- */

/* Blocks until the operation completes (timeout_ms -1: its own timeout) and returns its status.
 * C10D_ERR_TIMEOUT for a shorter timeout leaves the operation running. On CUDA buffers (NCCL)
 * it instead orders the buffers' stream after the operation and returns (set
 * C10D_NCCL_BLOCKING_WAIT=1 to block); the operation's error then arrives through
 * c10d_work_test or the completion callback. */
C10D_C_EXPORT c10d_status c10d_work_wait(c10d_work* work, int64_t timeout_ms);
/* *completed: whether it has completed; the status is its error once completed with one. */
C10D_C_EXPORT c10d_status c10d_work_test(c10d_work* work, int* completed);
/* The sender of a completed receive. */
C10D_C_EXPORT c10d_status c10d_work_source_rank(c10d_work* work, int* rank);
/* callback(user, status, message) once the operation completes: message is the error's text
 * ("" on success), valid during the call. Runs on the completing thread, or at once when the
 * operation has completed; it must not free this work. */
typedef void (*c10d_work_callback)(void* user, c10d_status status, const char* message);
C10D_C_EXPORT c10d_status c10d_work_on_completion(c10d_work* work, c10d_work_callback callback,
                                                  void* user);
C10D_C_EXPORT void c10d_work_free(c10d_work* work);

/* ---- DLPack ---- */

/* A buffer over a DLPack tensor's memory (no copy, ownership stays with the caller): contiguous,
 * lanes 1, a dtype above, on CPU, CUDA-host (as CPU) or CUDA. The tensor must outlive every use
 * of the buffer. (DLPack's DLTensor is an unnamed struct, so the managed tensor is what C can
 * name; every framework's __dlpack__ capsule holds one.) */
C10D_C_EXPORT c10d_status c10d_buffer_from_dlpack(const struct DLManagedTensor* tensor,
                                                  c10d_buffer* out);
/* A 1-D DLPack tensor over buffer's memory (no copy). The caller keeps the memory alive until
 * it calls the result's deleter, which it must call once. */
C10D_C_EXPORT c10d_status c10d_buffer_to_dlpack(const c10d_buffer* buffer,
                                                struct DLManagedTensor** out);

/* ---- data-parallel reducer ----
 * DDP's gradient reducer (c10d/training/DistributedDataParallel.hpp): gradients registered once,
 * marked ready as the framework's backward produces them (any thread), reduced in buckets while
 * the backward goes on, averaged over the ranks by c10d_ddp_finalize_backward. */

typedef struct c10d_ddp c10d_ddp;

typedef struct c10d_ddp_parameter {
  c10d_buffer value;
  c10d_buffer grad; /* same dtype, device, count; data NULL with gradient_as_bucket_view */
  const char* name; /* for errors; may be NULL */
} c10d_ddp_parameter;

typedef enum c10d_ddp_hook {
  C10D_DDP_ALLREDUCE = 0, /* average in the gradients' dtype */
  C10D_DDP_FP16 = 1,      /* reduce in float16: half the bytes (CPU float32/float64 buckets) */
  C10D_DDP_BF16 = 2       /* reduce in bfloat16 */
} c10d_ddp_hook;

typedef struct c10d_ddp_options {
  size_t struct_size;
  size_t first_bucket_bytes; /* the first (last layers') bucket, small to start early */
  size_t bucket_cap_bytes;   /* the others */
  int find_unused_parameters;
  int gradient_as_bucket_view; /* the reducer owns the gradients: c10d_ddp_gradient */
  int divide_by_initial_world_size;
  int rebuild_buckets; /* after the first backward, in the order rank 0 saw gradients ready */
  c10d_ddp_hook hook;
} c10d_ddp_options;
#define C10D_DDP_OPTIONS_INIT \
  { sizeof(c10d_ddp_options), 1u << 20, 25u << 20, 0, 0, 0, 1, 0 }

/* Every rank of group registers the same parameters in the same order. */
C10D_C_EXPORT c10d_status c10d_ddp_create(c10d_group* group, const c10d_ddp_parameter* parameters,
                                          size_t num_parameters, const c10d_ddp_options* options,
                                          c10d_ddp** out);
/* Collective: checks that the ranks registered the same parameters, then broadcasts them (and
 * buffers, may be NULL) from root. */
C10D_C_EXPORT c10d_status c10d_ddp_sync_parameters(c10d_ddp* ddp, const c10d_buffer* buffers,
                                                   size_t num_buffers, int root);
/* Optional, before a backward: how many ranks run it (uneven inputs); -1: all. */
C10D_C_EXPORT c10d_status c10d_ddp_prepare_for_backward(c10d_ddp* ddp, int active_ranks);
/* Gradient index is final for this backward; any thread. */
C10D_C_EXPORT c10d_status c10d_ddp_mark_grad_ready(c10d_ddp* ddp, size_t index);
/* Waits for every bucket; *synced (may be NULL): 0 for a no-sync backward. */
C10D_C_EXPORT c10d_status c10d_ddp_finalize_backward(c10d_ddp* ddp, int* synced);
/* On a rank out of data: the collectives of one backward with zeros. */
C10D_C_EXPORT c10d_status c10d_ddp_shadow_backward(c10d_ddp* ddp);
/* Nonzero: backwards accumulate without communicating until it is set back to 0. */
C10D_C_EXPORT c10d_status c10d_ddp_set_no_sync(c10d_ddp* ddp, int no_sync);
/* Where gradient index lives (with gradient_as_bucket_view, the reducer's memory: fetch it again
 * after each c10d_ddp_finalize_backward, as the first one may move it). */
C10D_C_EXPORT c10d_status c10d_ddp_gradient(c10d_ddp* ddp, size_t index, c10d_buffer* out);
C10D_C_EXPORT void c10d_ddp_free(c10d_ddp* ddp);

/* ---- RPC ----
 * Workers call functions registered by name on each other. A message is bytes (any encoding the
 * program chooses) plus tensors (DLPack); the callee's function gets the request and fills the
 * reply. Calls have timeouts; a function that fails, or a worker lost, fails the call with
 * C10D_ERR_REMOTE naming the function and the worker. */

typedef struct c10d_rpc c10d_rpc;
typedef struct c10d_rpc_future c10d_rpc_future;
typedef struct c10d_rpc_message c10d_rpc_message;

C10D_C_EXPORT c10d_status c10d_rpc_message_new(c10d_rpc_message** out);
C10D_C_EXPORT void c10d_rpc_message_free(c10d_rpc_message* message);
/* Copies size bytes into the message (replacing what it had). */
C10D_C_EXPORT c10d_status c10d_rpc_message_set_bytes(c10d_rpc_message* message, const void* data,
                                                     size_t size);
/* The message's bytes, valid until it changes or is freed. */
C10D_C_EXPORT c10d_status c10d_rpc_message_bytes(const c10d_rpc_message* message, const void** data,
                                                 size_t* size);
/* Appends a tensor, taking ownership whatever the status (the library calls its deleter once it
 * is sent, or at once when it refuses it). Its memory is read when the message is sent, not
 * copied before. */
C10D_C_EXPORT c10d_status c10d_rpc_message_add_tensor(c10d_rpc_message* message,
                                                      struct DLManagedTensor* tensor);
C10D_C_EXPORT size_t c10d_rpc_message_num_tensors(const c10d_rpc_message* message);
/* Tensor i of the message, zero copy, as a new DLManagedTensor the caller owns (call its deleter
 * once; the memory stays valid until then, also after the message is freed). */
C10D_C_EXPORT c10d_status c10d_rpc_message_tensor(const c10d_rpc_message* message, size_t index,
                                                  struct DLManagedTensor** out);
/* In a function: the error text the caller will see when the function returns a failure. */
C10D_C_EXPORT c10d_status c10d_rpc_message_set_error(c10d_rpc_message* reply, const char* text);

/* A function callers reach by name. It runs on one of the agent's threads, several at a time;
 * it reads request and fills reply (both owned by the library). Returning anything but C10D_OK
 * fails the call with that status's name and the text of c10d_rpc_message_set_error. */
typedef c10d_status (*c10d_rpc_function)(void* user, const c10d_rpc_message* request,
                                         c10d_rpc_message* reply);
/* A function that replies later (PyTorch's @rpc.functions.async_execution): it returns C10D_OK
 * at once, having kept responder, and answers the call with c10d_rpc_respond later, from any
 * thread, without holding one of the agent's threads meanwhile. Returning anything else without
 * having responded fails the call as a c10d_rpc_function's failure does (responder is then the
 * library's to free). */
typedef struct c10d_rpc_responder c10d_rpc_responder;
typedef c10d_status (*c10d_rpc_async_function)(void* user, const c10d_rpc_message* request,
                                               c10d_rpc_responder* responder);
typedef struct c10d_rpc_function_entry {
  const char* name;
  c10d_rpc_function function;
  void* user;
} c10d_rpc_function_entry;

typedef struct c10d_rpc_async_function_entry {
  const char* name;
  c10d_rpc_async_function function;
  void* user;
} c10d_rpc_async_function_entry;

typedef struct c10d_rpc_options {
  size_t struct_size;
  int64_t timeout_ms;      /* a call's default timeout */
  int64_t init_timeout_ms; /* how long c10d_rpc_init waits for every worker */
  int threads;             /* threads that run incoming calls */
  /* API version 4: functions that reply later, registered with the others before any call can
   * arrive (a struct_size without these fields, a caller built before them, means none). */
  const c10d_rpc_async_function_entry* async_functions;
  size_t num_async_functions;
} c10d_rpc_options;
#define C10D_RPC_OPTIONS_INIT \
  { sizeof(c10d_rpc_options), 60000, 60000, 4, NULL, 0 }

/* Joins the RPC job as worker `name` (unique) with id `rank` of world_size, through a store every
 * worker shares (c10d_store_connect gives the job's), with the given functions registered before
 * any call can arrive. Returns once every worker has done the same. */
C10D_C_EXPORT c10d_status c10d_rpc_init(c10d_store* store, const char* name, int rank,
                                        int world_size, const c10d_rpc_function_entry* functions,
                                        size_t num_functions, const c10d_rpc_options* options,
                                        c10d_rpc** out);
/* Registers one more function; callers must not call it before this returns. */
C10D_C_EXPORT c10d_status c10d_rpc_register(c10d_rpc* agent, const char* name,
                                            c10d_rpc_function function, void* user);
/* The id (rank) of the worker named name; the name of worker id (valid while the agent is), and
 * how many workers there are (ids 0 to count - 1). */
C10D_C_EXPORT c10d_status c10d_rpc_register_async(c10d_rpc* agent, const char* name,
                                                  c10d_rpc_async_function function, void* user);
/* Answers the call responder stands for, once, and frees responder: status C10D_OK sends reply
 * (copied; it stays the caller's), anything else fails the call with that status's name and the
 * text of reply's c10d_rpc_message_set_error (reply may then be NULL). */
C10D_C_EXPORT c10d_status c10d_rpc_respond(c10d_rpc_responder* responder, c10d_status status,
                                           const c10d_rpc_message* reply);
C10D_C_EXPORT c10d_status c10d_rpc_worker_id(c10d_rpc* agent, const char* name, int* id);
C10D_C_EXPORT c10d_status c10d_rpc_worker_name(c10d_rpc* agent, int id, const char** name);
C10D_C_EXPORT c10d_status c10d_rpc_worker_count(c10d_rpc* agent, int* count);
/* Calls function on worker `to` with args (NULL: empty); timeout_ms -1: the agent's. args may be
 * freed when this returns; its tensors' memory must stay valid until the future completes. */
C10D_C_EXPORT c10d_status c10d_rpc_call(c10d_rpc* agent, const char* to, const char* function,
                                        const c10d_rpc_message* args, int64_t timeout_ms,
                                        c10d_rpc_future** out);
/* The same, blocking: *result is the reply (c10d_rpc_message_free it). */
C10D_C_EXPORT c10d_status c10d_rpc_call_sync(c10d_rpc* agent, const char* to, const char* function,
                                             const c10d_rpc_message* args, int64_t timeout_ms,
                                             c10d_rpc_message** result);
/* Waits up to timeout_ms (-1: until the call ends, by its own timeout at the latest) and returns
 * the call's status; *result (may be NULL) gets the reply. C10D_ERR_TIMEOUT for a shorter
 * timeout leaves the call running. */
/* Runs callback(user) once future's call has ended: at once on this thread when it has, else on
 * one of the agent's threads. The callback must not block; it may wait on future (it returns at
 * once). */
typedef void (*c10d_rpc_callback)(void* user);
C10D_C_EXPORT c10d_status c10d_rpc_future_on_done(c10d_rpc_future* future,
                                                  c10d_rpc_callback callback, void* user);
C10D_C_EXPORT c10d_status c10d_rpc_future_wait(c10d_rpc_future* future, int64_t timeout_ms,
                                               c10d_rpc_message** result);
C10D_C_EXPORT c10d_status c10d_rpc_future_test(c10d_rpc_future* future, int* completed);
C10D_C_EXPORT void c10d_rpc_future_free(c10d_rpc_future* future);
/* Graceful (nonzero): waits for every worker to finish its calls, then closes; otherwise closes
 * at once, failing calls in flight. Later calls fail with C10D_ERR_STATE. */
C10D_C_EXPORT c10d_status c10d_rpc_shutdown(c10d_rpc* agent, int graceful);
C10D_C_EXPORT void c10d_rpc_free(c10d_rpc* agent);

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
  C10D_SLICE_BOX = 0, /* offsets[ndim] and sizes[ndim]: a box of the global tensor */
  C10D_SLICE_FLAT = 1 /* offsets[0], sizes[0]: elements [begin, begin + count) in row-major order */
} c10d_slice_kind;

typedef struct c10d_checkpoint_save_options {
  size_t struct_size;
  int overwrite;                /* replace a complete checkpoint at the folder */
  int64_t checksum_block_bytes; /* bytes per checksum; 0: 1 MiB */
  const char* layout;           /* how the job is laid out, kept for inspect; NULL: none */
} c10d_checkpoint_save_options;
#define C10D_CHECKPOINT_SAVE_OPTIONS_INIT \
  { sizeof(c10d_checkpoint_save_options), 0, 0, NULL }

typedef struct c10d_checkpoint_load_options {
  size_t struct_size;
  int allow_unexpected; /* the checkpoint may hold tensors no rank asks for */
  int allow_missing;    /* the state may ask for tensors and values the checkpoint lacks */
  int check_first;      /* 1: check every block before writing any tensor (LoadOptions) */
} c10d_checkpoint_load_options;
#define C10D_CHECKPOINT_LOAD_OPTIONS_INIT \
  { sizeof(c10d_checkpoint_load_options), 0, 0, 1 }

C10D_C_EXPORT c10d_status c10d_checkpoint_state_new(c10d_checkpoint_state** state);
C10D_C_EXPORT void c10d_checkpoint_state_free(c10d_checkpoint_state* state);
/* Adds local (contiguous) as a slice of the global tensor name of global_shape[ndim] and local's
 * dtype. offsets and sizes both NULL: local is the whole tensor. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_add(c10d_checkpoint_state* state, const char* name,
                                                    const c10d_buffer* local,
                                                    const int64_t* global_shape, size_t ndim,
                                                    c10d_slice_kind kind, const int64_t* offsets,
                                                    const int64_t* sizes);
C10D_C_EXPORT c10d_status c10d_checkpoint_state_set_value(c10d_checkpoint_state* state,
                                                          const char* name, const void* data,
                                                          size_t size);
/* An integer value in the form C++'s State::setInt stores ("int64:<decimal>"), which
 * c10d-checkpoint inspect prints and latest() orders "step" by; get_int fails with
 * C10D_ERR_INVALID_ARGUMENT for a value that is absent or not such an integer. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_set_int(c10d_checkpoint_state* state,
                                                        const char* name, int64_t value);
C10D_C_EXPORT c10d_status c10d_checkpoint_state_get_int(const c10d_checkpoint_state* state,
                                                        const char* name, int64_t* value);
/* The value as set or loaded into *value (release value->data with c10d_free); *found 0 and
 * value empty when absent. */
C10D_C_EXPORT c10d_status c10d_checkpoint_state_get_value(const c10d_checkpoint_state* state,
                                                          const char* name, c10d_bytes* value,
                                                          int* found);

/* Collectives over group (NULL: this process alone). */
C10D_C_EXPORT c10d_status c10d_checkpoint_save(const c10d_checkpoint_state* state, const char* dir,
                                               c10d_group* group,
                                               const c10d_checkpoint_save_options* options);
C10D_C_EXPORT c10d_status c10d_checkpoint_load(c10d_checkpoint_state* state, const char* dir,
                                               c10d_group* group,
                                               const c10d_checkpoint_load_options* options);

/* Saves in the background (AsyncSaver): new is collective over group; save returns once the
 * state's buffers are copied, and the next save or wait returns a failed save's error. */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_new(c10d_group* group, int refuse_while_busy,
                                                    c10d_checkpoint_saver** saver);
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_save(c10d_checkpoint_saver* saver,
                                                     const c10d_checkpoint_state* state,
                                                     const char* dir,
                                                     const c10d_checkpoint_save_options* options);
/* *done: 1 when no save is running (its outcome is then what wait returns at once). */
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_done(c10d_checkpoint_saver* saver, int* done);
C10D_C_EXPORT c10d_status c10d_checkpoint_saver_wait(c10d_checkpoint_saver* saver);
/* Waits for a save in flight. */
C10D_C_EXPORT void c10d_checkpoint_saver_free(c10d_checkpoint_saver* saver);

/* The newest complete checkpoint under root into *path (c10d_free it); *found 0 when none. */
C10D_C_EXPORT c10d_status c10d_checkpoint_latest(const char* root, c10d_bytes* path, int* found);
/* Removes all but the newest keep complete checkpoints under root, and partial ones. */
C10D_C_EXPORT c10d_status c10d_checkpoint_keep_last(const char* root, size_t keep);
/* Checks every checksum: *problems their number, *report one line each (c10d_free it). */
C10D_C_EXPORT c10d_status c10d_checkpoint_verify(const char* dir, c10d_bytes* report,
                                                 int* problems);
C10D_C_EXPORT c10d_status c10d_checkpoint_consolidate(const char* dir, const char* out);

/* ---- recovery (c10d/elastic/ElasticGroup.hpp, docs/elastic.md) ----
 * A group that survives the loss of ranks: after a failed step the survivors call
 * c10d_elastic_reform and go on in a new generation; a process c10drun --max-restarts started
 * again calls c10d_elastic_join once, and the members admit it at a step boundary. One thread
 * drives a c10d_elastic. */
typedef struct c10d_elastic c10d_elastic;

typedef struct c10d_elastic_options {
  size_t struct_size;
  const char* backend;     /* NULL: C10D_BACKEND, else "gloo" */
  int64_t timeout_ms;      /* each generation's op timeout; 0: C10D_TIMEOUT (30 minutes) */
  const char* group_name;  /* NULL: "default"; also names the store keys */
  int min_size;            /* fewer members after a loss fail reform; 0: 1 */
  int64_t join_timeout_ms; /* how long reform waits for a member neither here nor dead; 0: 10 s */
} c10d_elastic_options;
#define C10D_ELASTIC_OPTIONS_INIT \
  { sizeof(c10d_elastic_options), NULL, 0, NULL, 0, 0 }

/* What a reform or join changed (c10d_elastic_members gives the ids). */
typedef struct c10d_reformation {
  size_t struct_size;
  uint64_t generation;
  int64_t step;      /* the committed step every member is at */
  int healed;        /* this rank received the state from a member ahead */
  size_t num_lost;   /* ids of the old generation not in the new one */
  size_t num_joined; /* restarted processes admitted */
  double seconds;
} c10d_reformation;
#define C10D_REFORMATION_INIT \
  { sizeof(c10d_reformation), 0, 0, 0, 0, 0, 0.0 }

/* Rank, size and store from the environment (as c10d_group_init). */
C10D_C_EXPORT c10d_status c10d_elastic_from_env(const c10d_elastic_options* options,
                                                c10d_elastic** out);
C10D_C_EXPORT void c10d_elastic_free(c10d_elastic* elastic);
/* The current generation's group as a new handle (c10d_group_free it). After a reform it is
 * shut down: its operations fail with C10D_ERR_STATE; take the new one. */
C10D_C_EXPORT c10d_status c10d_elastic_group(c10d_elastic* elastic, c10d_group** out);
/* *committed 1 when every rank passed ok != 0 and the agreement succeeded; 0: reform. */
C10D_C_EXPORT c10d_status c10d_elastic_commit(c10d_elastic* elastic, int ok, int* committed);
/* 1 on every member, from the commit that saw it, when a restarted process asks to join. */
C10D_C_EXPORT int c10d_elastic_joins_pending(const c10d_elastic* elastic);
/* Re-forms from the live members and the processes asking to join, and heals state (NULL: none;
 * members at different steps then fail with C10D_ERR_STATE). C10D_ERR_STATE when this rank was
 * left out or fewer than min_size remain. */
C10D_C_EXPORT c10d_status c10d_elastic_reform(c10d_elastic* elastic, c10d_checkpoint_state* state,
                                              c10d_reformation* out);
/* A restarted process: waits to be admitted, then receives state. Others: returns at once. */
C10D_C_EXPORT c10d_status c10d_elastic_join(c10d_elastic* elastic, c10d_checkpoint_state* state,
                                            c10d_reformation* out);
/* The current members' ids by rank into ids[capacity]; *count their number. */
C10D_C_EXPORT c10d_status c10d_elastic_members(const c10d_elastic* elastic, int* ids,
                                               size_t capacity, size_t* count);
C10D_C_EXPORT int c10d_elastic_id(const c10d_elastic* elastic);
C10D_C_EXPORT int64_t c10d_elastic_step(const c10d_elastic* elastic);
C10D_C_EXPORT uint64_t c10d_elastic_generation(const c10d_elastic* elastic);
C10D_C_EXPORT int64_t c10d_elastic_incarnation(const c10d_elastic* elastic);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_C10D_H */
