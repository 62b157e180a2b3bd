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

/** An RPC agent: this worker's place in the RPC job. Free it with c10d_rpc_free. */
typedef struct c10d_rpc c10d_rpc;
/** A call in flight (c10d_rpc_call): free it with c10d_rpc_future_free. */
typedef struct c10d_rpc_future c10d_rpc_future;
/** A request or reply: bytes plus tensors. Free the caller's with c10d_rpc_message_free. */
typedef struct c10d_rpc_message c10d_rpc_message;

/** An empty message (no bytes, no tensors), for a call's arguments or an async reply.
 * \param[out] out the message; the caller frees it with c10d_rpc_message_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when out is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_message_new(c10d_rpc_message** out);
/** Releases a message the caller owns (not the request or reply a function is handed). Tensors
 * taken from it with c10d_rpc_message_tensor stay valid.
 * \param message the message, or NULL (ignored). */
C10D_C_EXPORT void c10d_rpc_message_free(c10d_rpc_message* message);
/** Copies size bytes into the message (replacing what it had).
 * \param message the message.
 * \param data the bytes; may be NULL when size is 0.
 * \param size bytes at data.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL message, or NULL data with a size. */
C10D_C_EXPORT c10d_status c10d_rpc_message_set_bytes(c10d_rpc_message* message, const void* data,
                                                     size_t size);
/** The message's bytes, valid until it changes or is freed.
 * \param message the message.
 * \param[out] data the first byte, owned by the message.
 * \param[out] size the number of bytes.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when an argument is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_message_bytes(const c10d_rpc_message* message, const void** data,
                                                 size_t* size);
/** Appends a tensor, taking ownership whatever the status (the library calls its deleter once it
 * is sent, or at once when it refuses it). Its memory is read when the message is sent, not
 * copied before.
 * \param message the message.
 * \param tensor a CPU (or CUDA-host) DLPack tensor; the library's from this call on.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, CUDA memory (copy it to the
 *         host first), or an unsupported device, dtype or lanes. */
C10D_C_EXPORT c10d_status c10d_rpc_message_add_tensor(c10d_rpc_message* message,
                                                      struct DLManagedTensor* tensor);
/** The number of tensors in the message.
 * \param message the message.
 * \return how many tensors it holds; 0 for a NULL message. */
C10D_C_EXPORT size_t c10d_rpc_message_num_tensors(const c10d_rpc_message* message);
/** Tensor i of the message, zero copy, as a new DLManagedTensor the caller owns (call its deleter
 * once; the memory stays valid until then, also after the message is freed).
 * \param message the message.
 * \param index the tensor's index, below c10d_rpc_message_num_tensors.
 * \param[out] out the new DLManagedTensor.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or an index out of range. */
C10D_C_EXPORT c10d_status c10d_rpc_message_tensor(const c10d_rpc_message* message, size_t index,
                                                  struct DLManagedTensor** out);
/** In a function: the error text the caller will see when the function returns a failure.
 * \param reply the reply the function was handed (or, for c10d_rpc_respond, the one it passes).
 * \param text the message, copied.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when reply or text is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_message_set_error(c10d_rpc_message* reply, const char* text);

/** A function callers reach by name. It runs on one of the agent's threads, several at a time;
 * it reads request and fills reply (both owned by the library). Returning anything but C10D_OK
 * fails the call with that status's name and the text of c10d_rpc_message_set_error.
 * \param user the pointer it was registered with.
 * \param request the caller's message, valid during the call.
 * \param reply the message sent back, empty at the start, valid during the call.
 * \return C10D_OK to send reply; any other status fails the call (C10D_ERR_REMOTE for its
 *         caller). */
typedef c10d_status (*c10d_rpc_function)(void* user, const c10d_rpc_message* request,
                                         c10d_rpc_message* reply);
/** The pending call a c10d_rpc_async_function answers through c10d_rpc_respond (which frees
 * it). */
typedef struct c10d_rpc_responder c10d_rpc_responder;
/** A function that replies later (PyTorch's \@rpc.functions.async_execution): it returns C10D_OK
 * at once, having kept responder, and answers the call with c10d_rpc_respond later, from any
 * thread, without holding one of the agent's threads meanwhile. Returning anything else without
 * having responded fails the call as a c10d_rpc_function's failure does (responder is then the
 * library's to free).
 * \param user the pointer it was registered with.
 * \param request the caller's message, valid during the call only (copy what the reply needs).
 * \param responder the call to answer, once, with c10d_rpc_respond (which frees it).
 * \return C10D_OK having kept responder (or responded); anything else, without having
 *         responded, fails the call. */
typedef c10d_status (*c10d_rpc_async_function)(void* user, const c10d_rpc_message* request,
                                               c10d_rpc_responder* responder);
/** A function registered by c10d_rpc_init. */
typedef struct c10d_rpc_function_entry {
  const char* name;           /**< the name callers use; must not be NULL or start with "c10d." */
  c10d_rpc_function function; /**< the function; must not be NULL */
  void* user;                 /**< passed to function as is */
} c10d_rpc_function_entry;

/** A function that replies later, registered by c10d_rpc_init (c10d_rpc_options). */
typedef struct c10d_rpc_async_function_entry {
  const char* name;                 /**< the name callers use; as c10d_rpc_function_entry's */
  c10d_rpc_async_function function; /**< the function; must not be NULL */
  void* user;                       /**< passed to function as is */
} c10d_rpc_async_function_entry;

/** The agent's settings: start from C10D_RPC_OPTIONS_INIT. */
typedef struct c10d_rpc_options {
  /** sizeof(c10d_rpc_options), as C10D_RPC_OPTIONS_INIT sets; the size up to async_functions
   * from a caller built before API version 4. */
  size_t struct_size;
  int64_t timeout_ms;      /**< a call's default timeout */
  int64_t init_timeout_ms; /**< how long c10d_rpc_init waits for every worker */
  int threads;             /**< threads that run incoming calls */
  /** API version 4: functions that reply later, registered with the others before any call can
   * arrive (a struct_size without these fields, a caller built before them, means none). */
  const c10d_rpc_async_function_entry* async_functions;
  size_t num_async_functions; /**< entries at async_functions */
} c10d_rpc_options;
/** The defaults of c10d_rpc_options: 60 s timeouts, 4 threads, no async functions. */
#define C10D_RPC_OPTIONS_INIT \
  { sizeof(c10d_rpc_options), 60000, 60000, 4, NULL, 0 }

/** Joins the RPC job as worker `name` (unique) with id `rank` of world_size, through a store every
 * worker shares (c10d_store_connect gives the job's), with the given functions registered before
 * any call can arrive. Returns once every worker has done the same.
 * \param store the shared store.
 * \param name this worker's name, unique in the job.
 * \param rank this worker's id, in [0, world_size).
 * \param world_size the number of workers.
 * \param functions num_functions functions to register; may be NULL when num_functions is 0.
 * \param num_functions how many functions.
 * \param options the agent's settings; NULL: the defaults.
 * \param[out] out the agent; the caller frees it with c10d_rpc_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or name, bad options (a
 *         struct_size this library does not know, a timeout or thread count that is not
 *         positive), a NULL or reserved function, a name taken, or a bad rank; C10D_ERR_TIMEOUT
 *         naming the workers that did not appear within init_timeout_ms; C10D_ERR_STORE when
 *         the store fails. */
C10D_C_EXPORT c10d_status c10d_rpc_init(c10d_store* store, const char* name, int rank,
                                        int world_size, const c10d_rpc_function_entry* functions,
                                        size_t num_functions, const c10d_rpc_options* options,
                                        c10d_rpc** out);
/** Registers one more function; callers must not call it before this returns.
 * \param agent the agent.
 * \param name the name callers use; must not start with "c10d.".
 * \param function the function.
 * \param user passed to function as is.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a name taken or a reserved
 *         one. */
C10D_C_EXPORT c10d_status c10d_rpc_register(c10d_rpc* agent, const char* name,
                                            c10d_rpc_function function, void* user);
/** Registers one more function that replies later (c10d_rpc_async_function); callers must not
 * call it before this returns.
 * \param agent the agent.
 * \param name the name callers use; must not start with "c10d.".
 * \param function the function.
 * \param user passed to function as is.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument, a name taken or a reserved
 *         one. */
C10D_C_EXPORT c10d_status c10d_rpc_register_async(c10d_rpc* agent, const char* name,
                                                  c10d_rpc_async_function function, void* user);
/** Answers the call responder stands for, once, and frees responder: status C10D_OK sends reply
 * (copied; it stays the caller's), anything else fails the call with that status's name and the
 * text of reply's c10d_rpc_message_set_error (reply may then be NULL).
 * \param responder the call to answer; freed once this returns C10D_OK, so it must not be
 *        used again (a second respond, like a second free, is not an error the library can see).
 * \param status C10D_OK to send reply, or the failure to report.
 * \param reply the reply; may be NULL when status is not C10D_OK.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL responder or a NULL reply with C10D_OK
 *         (responder is then still the caller's to answer). */
C10D_C_EXPORT c10d_status c10d_rpc_respond(c10d_rpc_responder* responder, c10d_status status,
                                           const c10d_rpc_message* reply);
/** The id (rank) of the worker named name; the name of worker id (valid while the agent is), and
 * how many workers there are (ids 0 to count - 1).
 * This call looks up the id.
 * \param agent the agent.
 * \param name a worker's name.
 * \param[out] id its id.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or an unknown name (the known
 *         ones are named). */
C10D_C_EXPORT c10d_status c10d_rpc_worker_id(c10d_rpc* agent, const char* name, int* id);
/** The name of worker id (see c10d_rpc_worker_id).
 * \param agent the agent.
 * \param id a worker's id, in [0, count).
 * \param[out] name its name, owned by the agent: valid while the agent is.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or an id out of range. */
C10D_C_EXPORT c10d_status c10d_rpc_worker_name(c10d_rpc* agent, int id, const char** name);
/** How many workers the job has (see c10d_rpc_worker_id).
 * \param agent the agent.
 * \param[out] count the number of workers.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when agent or count is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_worker_count(c10d_rpc* agent, int* count);
/** Calls function on worker `to` with args (NULL: empty); timeout_ms -1: the agent's. args may be
 * freed when this returns; its tensors' memory must stay valid until the future completes.
 * \param agent the agent.
 * \param to the callee's worker name.
 * \param function the function's registered name.
 * \param args the arguments, or NULL.
 * \param timeout_ms the call's timeout, in milliseconds (positive); -1: the agent's.
 * \param[out] out the call's future; the caller frees it with c10d_rpc_future_free.
 * \return C10D_OK once the call is sent (its outcome comes through the future);
 *         C10D_ERR_INVALID_ARGUMENT for a NULL argument, an unknown worker or a timeout_ms of
 *         0; C10D_ERR_STATE after c10d_rpc_shutdown. */
C10D_C_EXPORT c10d_status c10d_rpc_call(c10d_rpc* agent, const char* to, const char* function,
                                        const c10d_rpc_message* args, int64_t timeout_ms,
                                        c10d_rpc_future** out);
/** The same, blocking: *result is the reply (c10d_rpc_message_free it).
 * \param agent the agent.
 * \param to the callee's worker name.
 * \param function the function's registered name.
 * \param args the arguments, or NULL.
 * \param timeout_ms the call's timeout, in milliseconds; -1: the agent's.
 * \param[out] result the reply, the caller's to free with c10d_rpc_message_free; may be NULL
 *        to drop it. Set only on C10D_OK.
 * \return C10D_OK; c10d_rpc_call's errors; C10D_ERR_REMOTE when the function failed or the
 *         callee was lost; C10D_ERR_TIMEOUT when the call timed out; C10D_ERR_STATE when the
 *         agent was shut down. */
C10D_C_EXPORT c10d_status c10d_rpc_call_sync(c10d_rpc* agent, const char* to, const char* function,
                                             const c10d_rpc_message* args, int64_t timeout_ms,
                                             c10d_rpc_message** result);
/** Runs callback(user) once future's call has ended: at once on this thread when it has, else on
 * one of the agent's threads. The callback must not block; it may wait on future (it returns at
 * once).
 * \param user the pointer given to c10d_rpc_future_on_done. */
typedef void (*c10d_rpc_callback)(void* user);
/** Registers callback to run once future's call has ended (see c10d_rpc_callback).
 * \param future the call's future.
 * \param callback the function; must not be NULL.
 * \param user passed to callback as is.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when future or callback is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_future_on_done(c10d_rpc_future* future,
                                                  c10d_rpc_callback callback, void* user);
/** Waits up to timeout_ms (-1: until the call ends, by its own timeout at the latest) and returns
 * the call's status; *result (may be NULL) gets the reply. C10D_ERR_TIMEOUT for a shorter
 * timeout leaves the call running.
 * \param future the call's future.
 * \param timeout_ms how long to wait, in milliseconds; -1: until the call ends.
 * \param[out] result a new copy of the reply, the caller's to free with c10d_rpc_message_free;
 *        may be NULL. Set only on C10D_OK.
 * \return C10D_OK; C10D_ERR_REMOTE when the function failed or the callee was lost;
 *         C10D_ERR_TIMEOUT when the call or this wait timed out; C10D_ERR_STATE when the agent
 *         was shut down; C10D_ERR_INVALID_ARGUMENT when future is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_future_wait(c10d_rpc_future* future, int64_t timeout_ms,
                                               c10d_rpc_message** result);
/** Whether the call has ended, without waiting (c10d_rpc_future_wait then returns at once).
 * \param future the call's future.
 * \param[out] completed 1 once the call has ended (with a reply or an error), else 0.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when future or completed is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_future_test(c10d_rpc_future* future, int* completed);
/** Releases the future; the call goes on, its outcome dropped.
 * \param future the future, or NULL (ignored). */
C10D_C_EXPORT void c10d_rpc_future_free(c10d_rpc_future* future);
/** Graceful (nonzero): waits for every worker to finish its calls, then closes; otherwise closes
 * at once, failing calls in flight. Later calls fail with C10D_ERR_STATE.
 * \param agent the agent (closed afterwards, whatever the status).
 * \param graceful nonzero: wait for every worker; 0: close at once.
 * \return C10D_OK; C10D_ERR_REMOTE naming a worker lost before it got there, C10D_ERR_TIMEOUT
 *         naming the workers missing at the agent's timeout (graceful only);
 *         C10D_ERR_INVALID_ARGUMENT when agent is NULL. */
C10D_C_EXPORT c10d_status c10d_rpc_shutdown(c10d_rpc* agent, int graceful);
/** Releases the agent, as its last use; one not shut down is closed at once, as
 * c10d_rpc_shutdown(agent, 0) does.
 * \param agent the agent, or NULL (ignored). */
C10D_C_EXPORT void c10d_rpc_free(c10d_rpc* agent);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_RPC_H */
