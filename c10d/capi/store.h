/** \file
 * c10d's C API: stores (c10d/capi/c10d.h has the conventions every call follows). */
#ifndef C10D_CAPI_STORE_H
#define C10D_CAPI_STORE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- stores ----
 * A store is the key-value service the ranks of a job meet through (store/Store.hpp): values are
 * bytes, blocking calls wait for keys up to a timeout (C10D_ERR_TIMEOUT naming the missing keys),
 * C10D_ERR_STORE means the store is unreachable or failed, and keys or values over the store's
 * limits are C10D_ERR_INVALID_ARGUMENT. A NULL store or key is C10D_ERR_INVALID_ARGUMENT. */

/** How c10d_store_tcp connects (and, with is_server, hosts): start from
 * C10D_TCP_STORE_OPTIONS_INIT. */
typedef struct c10d_tcp_store_options {
  size_t struct_size; /**< sizeof(c10d_tcp_store_options), as C10D_TCP_STORE_OPTIONS_INIT sets */
  const char* host;   /**< the server's address; the server itself listens on every address */
  uint16_t port;      /**< 0 with is_server: any free port (c10d_store_port tells which) */
  int is_server;      /**< nonzero: this process hosts the store */
  int num_workers;    /**< with wait_for_workers: how many clients the server waits for, or -1 */
  int64_t timeout_ms; /**< default timeout of blocking calls, and of connecting */
  /** Nonzero: c10d_store_tcp returns only once num_workers clients (the server's own included)
   * have connected; num_workers must then be > 0, and the same on every client. 0: num_workers is
   * ignored. */
  int wait_for_workers;
} c10d_tcp_store_options;
/** The defaults of c10d_tcp_store_options: a client of 127.0.0.1, port 0, a 300 s timeout, not
 * waiting for workers. */
#define C10D_TCP_STORE_OPTIONS_INIT \
  { sizeof(c10d_tcp_store_options), "127.0.0.1", 0, 0, -1, 300000, 0 }

/** A TCP store: connects to host:port (hosting the server first with is_server), retrying until
 * options->timeout_ms.
 * \param options how to connect; must not be NULL (start from C10D_TCP_STORE_OPTIONS_INIT).
 * \param[out] out the new store; the caller frees it with c10d_store_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for NULL options, out or host, a wrong struct_size, a
 *         timeout_ms that is not positive, or wait_for_workers without a positive num_workers;
 *         C10D_ERR_TIMEOUT when it cannot connect (or the workers do not come) within timeout_ms;
 *         C10D_ERR_STORE when the server cannot listen, the peer speaks another protocol, or
 *         authentication fails. */
C10D_C_EXPORT c10d_status c10d_store_tcp(const c10d_tcp_store_options* options, c10d_store** out);
/** A store in a file that every rank opens by path (num_workers: how many will, or -1).
 * With num_workers > 0, the last of those stores to be freed removes the file.
 * \param path the file, on a filesystem where flock() works (a local disk or tmpfs).
 * \param num_workers how many processes open the path, or -1 (the file is then kept).
 * \param timeout_ms the default timeout of blocking calls; must be positive.
 * \param[out] out the new store; the caller frees it with c10d_store_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL or empty path, a NULL out, or a
 *         timeout_ms that is not positive; C10D_ERR_STORE when the file cannot be opened, or
 *         (num_workers > 0, which reads and writes it here) cannot be locked, read or written or
 *         is corrupt. */
C10D_C_EXPORT c10d_status c10d_store_file(const char* path, int num_workers, int64_t timeout_ms,
                                          c10d_store** out);
/** A store inside this process (ranks as threads, tests).
 * \param[out] out the new, empty store; the caller frees it with c10d_store_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when out is NULL. */
C10D_C_EXPORT c10d_status c10d_store_hash(c10d_store** out);
/** Keys of base under prefix + "/". base stays usable and may be freed before the result.
 * c10d_store_num_keys of the result counts every key of base.
 * \param prefix the namespace; must not be NULL.
 * \param base the store underneath (the result keeps it alive).
 * \param[out] out the new store; the caller frees it with c10d_store_free.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when prefix, base or out is NULL. */
C10D_C_EXPORT c10d_status c10d_store_prefix(const char* prefix, c10d_store* base, c10d_store** out);
/** The port a TCP store's server listens on, or the port a client connected to.
 * \param store a TCP store, or a prefix store over one.
 * \param[out] port the port.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when store or port is NULL, or store is not a TCP
 *         store. */
C10D_C_EXPORT c10d_status c10d_store_port(c10d_store* store, uint16_t* port);

/** Sets key to size bytes of value (copied), replacing its value.
 * \param store the store.
 * \param key the key.
 * \param value the bytes; may be NULL when size is 0.
 * \param size bytes at value.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or a key or value over the
 *         store's limits; C10D_ERR_STORE when the store failed. */
C10D_C_EXPORT c10d_status c10d_store_set(c10d_store* store, const char* key, const void* value,
                                         size_t size);
/** Waits up to timeout_ms (-1: the store's timeout) for key; value->data is for c10d_free.
 * \param store the store.
 * \param key the key.
 * \param timeout_ms how long to wait for key, in milliseconds; -1: the store's timeout.
 * \param[out] value key's value, allocated by the library: release value->data with c10d_free.
 * \return C10D_OK; C10D_ERR_TIMEOUT when key did not appear in time; C10D_ERR_INVALID_ARGUMENT
 *         for a NULL argument; C10D_ERR_STORE when the store failed. */
C10D_C_EXPORT c10d_status c10d_store_get(c10d_store* store, const char* key, int64_t timeout_ms,
                                         c10d_bytes* value);
/** Atomically adds delta to the integer at key (absent counts as 0), kept as decimal text.
 * \param store the store.
 * \param key the key.
 * \param delta what to add (may be negative; 0 reads the counter, creating an absent key as 0).
 * \param[out] result the sum; may be NULL.
 * \return C10D_OK; C10D_ERR_STORE when key's value is not a decimal integer or the store failed;
 *         C10D_ERR_INVALID_ARGUMENT for a NULL store or key, or a sum that overflows. */
C10D_C_EXPORT c10d_status c10d_store_add(c10d_store* store, const char* key, int64_t delta,
                                         int64_t* result);
/** PyTorch's compare_set: sets desired when key's value is expected (or key is absent and expected
 * is empty); result is the value key has afterwards (expected when absent).
 * \param store the store.
 * \param key the key.
 * \param expected the value to compare with; may be NULL when expected_size is 0.
 * \param expected_size bytes at expected.
 * \param desired the value to set; may be NULL when desired_size is 0.
 * \param desired_size bytes at desired.
 * \param[out] result the value afterwards, allocated by the library: release result->data with
 *        c10d_free.
 * \return C10D_OK (whether or not it set desired); C10D_ERR_INVALID_ARGUMENT for a NULL argument;
 *         C10D_ERR_STORE when the store failed. */
C10D_C_EXPORT c10d_status c10d_store_compare_set(c10d_store* store, const char* key,
                                                 const void* expected, size_t expected_size,
                                                 const void* desired, size_t desired_size,
                                                 c10d_bytes* result);
/** Waits up to timeout_ms (-1: the store's timeout) until every key exists.
 * \param store the store.
 * \param keys num_keys keys; may be NULL when num_keys is 0.
 * \param num_keys how many keys.
 * \param timeout_ms how long to wait, in milliseconds; -1: the store's timeout.
 * \return C10D_OK once all exist; C10D_ERR_TIMEOUT naming the missing keys;
 *         C10D_ERR_INVALID_ARGUMENT for a NULL store or key; C10D_ERR_STORE when the store
 *         failed. */
C10D_C_EXPORT c10d_status c10d_store_wait(c10d_store* store, const char* const* keys,
                                          size_t num_keys, int64_t timeout_ms);
/** Whether every key exists now, without waiting.
 * \param store the store.
 * \param keys num_keys keys; may be NULL when num_keys is 0.
 * \param num_keys how many keys.
 * \param[out] all_exist 1 when every key exists, else 0.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL store, key or all_exist; C10D_ERR_STORE
 *         when the store failed. */
C10D_C_EXPORT c10d_status c10d_store_check(c10d_store* store, const char* const* keys,
                                           size_t num_keys, int* all_exist);
/** Removes key (not its queue).
 * \param store the store.
 * \param key the key.
 * \param[out] existed 1 when key existed, else 0; may be NULL.
 * \return C10D_OK, also for an absent key; C10D_ERR_INVALID_ARGUMENT for a NULL store or key;
 *         C10D_ERR_STORE when the store failed. */
C10D_C_EXPORT c10d_status c10d_store_delete(c10d_store* store, const char* key, int* existed);
/** How many keys the store holds (a prefix store: the whole store underneath; queues not counted).
 * \param store the store.
 * \param[out] count the number of keys.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL store or count; C10D_ERR_STORE when the
 *         store failed. */
C10D_C_EXPORT c10d_status c10d_store_num_keys(c10d_store* store, int64_t* count);
/** Queues (PyTorch 2.6's queue_push / queue_pop / queue_len): per key, values in first-in
 * first-out order, apart from the key's value; each value is popped once.
 * This call appends a copy of value to key's queue.
 * \param store the store.
 * \param key the queue's key.
 * \param value the bytes; may be NULL when size is 0.
 * \param size bytes at value.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument or a value over the store's
 *         limit; C10D_ERR_STORE when the store failed. */
C10D_C_EXPORT c10d_status c10d_store_queue_push(c10d_store* store, const char* key,
                                                const void* value, size_t size);
/** Pops key's front value into value (value->data is for c10d_free). timeout_ms -1: the store's
 * timeout, > 0: waits that long for a value, C10D_ERR_TIMEOUT when none came; 0: no wait, and
 * *popped says whether there was one (popped may be NULL otherwise).
 * \param store the store.
 * \param key the queue's key.
 * \param timeout_ms how long to wait for a value, in milliseconds; -1: the store's timeout; 0: no
 *        wait.
 * \param[out] value the value popped (0 bytes when none was), allocated by the library: release
 *        value->data with c10d_free.
 * \param[out] popped 1 when a value was popped, else 0; required with timeout_ms 0.
 * \return C10D_OK; C10D_ERR_TIMEOUT when no value came in time (timeout_ms not 0);
 *         C10D_ERR_INVALID_ARGUMENT for a NULL store, key or value, or a NULL popped with
 *         timeout_ms 0; C10D_ERR_STORE when the store failed. */
C10D_C_EXPORT c10d_status c10d_store_queue_pop(c10d_store* store, const char* key,
                                               int64_t timeout_ms, c10d_bytes* value, int* popped);
/** How many values key's queue holds.
 * \param store the store.
 * \param key the queue's key.
 * \param[out] length the number of values (0 for a key never pushed to).
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL argument; C10D_ERR_STORE when the store
 *         failed. */
C10D_C_EXPORT c10d_status c10d_store_queue_len(c10d_store* store, const char* key, int64_t* length);
/** The store's default timeout of blocking calls (what timeout_ms -1 means), and setting it.
 * \param store the store.
 * \param[out] timeout_ms the timeout, in milliseconds.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when store or timeout_ms is NULL. */
C10D_C_EXPORT c10d_status c10d_store_timeout(c10d_store* store, int64_t* timeout_ms);
/** Sets the store's default timeout of blocking calls. It may run while other calls do; a call
 * already started keeps the timeout it read.
 * \param store the store.
 * \param timeout_ms the new timeout, in milliseconds; must be positive.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT for a NULL store or a timeout that is not
 *         positive. */
C10D_C_EXPORT c10d_status c10d_store_set_timeout(c10d_store* store, int64_t timeout_ms);
/** Releases the handle, as its last use; the store lives on while the groups and prefix stores
 * made over it do.
 * \param store the handle, or NULL (ignored). */
C10D_C_EXPORT void c10d_store_free(c10d_store* store);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_STORE_H */
