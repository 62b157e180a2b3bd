/** \file
 * c10d's C API: RPC (c10d/capi/c10d.h has the conventions). */
#ifndef C10D_CAPI_RPC_H
#define C10D_CAPI_RPC_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/** Copies size bytes into the message (replacing what it had). */
C10D_C_EXPORT c10d_status c10d_rpc_message_set_bytes(c10d_rpc_message* message, const void* data,
                                                     size_t size);
/** The message's bytes, valid until it changes or is freed. */
C10D_C_EXPORT c10d_status c10d_rpc_message_bytes(const c10d_rpc_message* message, const void** data,
                                                 size_t* size);
/** Appends a tensor, taking ownership whatever the status (the library calls its deleter once it
 * is sent, or at once when it refuses it). Its memory is read when the message is sent, not
 * copied before. */
C10D_C_EXPORT c10d_status c10d_rpc_message_add_tensor(c10d_rpc_message* message,
                                                      struct DLManagedTensor* tensor);
C10D_C_EXPORT size_t c10d_rpc_message_num_tensors(const c10d_rpc_message* message);
/** Tensor i of the message, zero copy, as a new DLManagedTensor the caller owns (call its deleter
 * once; the memory stays valid until then, also after the message is freed). */
C10D_C_EXPORT c10d_status c10d_rpc_message_tensor(const c10d_rpc_message* message, size_t index,
                                                  struct DLManagedTensor** out);
/** In a function: the error text the caller will see when the function returns a failure. */
C10D_C_EXPORT c10d_status c10d_rpc_message_set_error(c10d_rpc_message* reply, const char* text);

/** A function callers reach by name. It runs on one of the agent's threads, several at a time;
 * it reads request and fills reply (both owned by the library). Returning anything but C10D_OK
 * fails the call with that status's name and the text of c10d_rpc_message_set_error. */
typedef c10d_status (*c10d_rpc_function)(void* user, const c10d_rpc_message* request,
                                         c10d_rpc_message* reply);
/** A function that replies later (PyTorch's @rpc.functions.async_execution): it returns C10D_OK
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
  int64_t timeout_ms;      /**< a call's default timeout */
  int64_t init_timeout_ms; /**< how long c10d_rpc_init waits for every worker */
  int threads;             /**< threads that run incoming calls */
  /** API version 4: functions that reply later, registered with the others before any call can
   * arrive (a struct_size without these fields, a caller built before them, means none). */
  const c10d_rpc_async_function_entry* async_functions;
  size_t num_async_functions;
} c10d_rpc_options;
#define C10D_RPC_OPTIONS_INIT \
  { sizeof(c10d_rpc_options), 60000, 60000, 4, NULL, 0 }

/** Joins the RPC job as worker `name` (unique) with id `rank` of world_size, through a store every
 * worker shares (c10d_store_connect gives the job's), with the given functions registered before
 * any call can arrive. Returns once every worker has done the same. */
C10D_C_EXPORT c10d_status c10d_rpc_init(c10d_store* store, const char* name, int rank,
                                        int world_size, const c10d_rpc_function_entry* functions,
                                        size_t num_functions, const c10d_rpc_options* options,
                                        c10d_rpc** out);
/** Registers one more function; callers must not call it before this returns. */
C10D_C_EXPORT c10d_status c10d_rpc_register(c10d_rpc* agent, const char* name,
                                            c10d_rpc_function function, void* user);
/** The id (rank) of the worker named name; the name of worker id (valid while the agent is), and
 * how many workers there are (ids 0 to count - 1). */
C10D_C_EXPORT c10d_status c10d_rpc_register_async(c10d_rpc* agent, const char* name,
                                                  c10d_rpc_async_function function, void* user);
/** Answers the call responder stands for, once, and frees responder: status C10D_OK sends reply
 * (copied; it stays the caller's), anything else fails the call with that status's name and the
 * text of reply's c10d_rpc_message_set_error (reply may then be NULL). */
C10D_C_EXPORT c10d_status c10d_rpc_respond(c10d_rpc_responder* responder, c10d_status status,
                                           const c10d_rpc_message* reply);
C10D_C_EXPORT c10d_status c10d_rpc_worker_id(c10d_rpc* agent, const char* name, int* id);
C10D_C_EXPORT c10d_status c10d_rpc_worker_name(c10d_rpc* agent, int id, const char** name);
C10D_C_EXPORT c10d_status c10d_rpc_worker_count(c10d_rpc* agent, int* count);
/** Calls function on worker `to` with args (NULL: empty); timeout_ms -1: the agent's. args may be
 * freed when this returns; its tensors' memory must stay valid until the future completes. */
C10D_C_EXPORT c10d_status c10d_rpc_call(c10d_rpc* agent, const char* to, const char* function,
                                        const c10d_rpc_message* args, int64_t timeout_ms,
                                        c10d_rpc_future** out);
/** The same, blocking: *result is the reply (c10d_rpc_message_free it). */
C10D_C_EXPORT c10d_status c10d_rpc_call_sync(c10d_rpc* agent, const char* to, const char* function,
                                             const c10d_rpc_message* args, int64_t timeout_ms,
                                             c10d_rpc_message** result);
/* Waits up to timeout_ms (-1: until the call ends, by its own timeout at the latest) and returns
 * the call's status; *result (may be NULL) gets the reply. C10D_ERR_TIMEOUT for a shorter
 * timeout leaves the call running. */
/** Runs callback(user) once future's call has ended: at once on this thread when it has, else on
 * one of the agent's threads. The callback must not block; it may wait on future (it returns at
 * once). */
typedef void (*c10d_rpc_callback)(void* user);
C10D_C_EXPORT c10d_status c10d_rpc_future_on_done(c10d_rpc_future* future,
                                                  c10d_rpc_callback callback, void* user);
C10D_C_EXPORT c10d_status c10d_rpc_future_wait(c10d_rpc_future* future, int64_t timeout_ms,
                                               c10d_rpc_message** result);
C10D_C_EXPORT c10d_status c10d_rpc_future_test(c10d_rpc_future* future, int* completed);
C10D_C_EXPORT void c10d_rpc_future_free(c10d_rpc_future* future);
/** Graceful (nonzero): waits for every worker to finish its calls, then closes; otherwise closes
 * at once, failing calls in flight. Later calls fail with C10D_ERR_STATE. */
C10D_C_EXPORT c10d_status c10d_rpc_shutdown(c10d_rpc* agent, int graceful);
C10D_C_EXPORT void c10d_rpc_free(c10d_rpc* agent);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_RPC_H */
