/** \file
 * c10d's C API: stores (c10d/capi/c10d.h has the conventions every call follows). */
#ifndef C10D_CAPI_STORE_H
#define C10D_CAPI_STORE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- stores ---- */

typedef struct c10d_tcp_store_options {
  size_t struct_size;
  const char* host;   /**< the server's address; the server itself listens on every address */
  uint16_t port;      /**< 0 with is_server: any free port (c10d_store_port tells which) */
  int is_server;      /**< nonzero: this process hosts the store */
  int num_workers;    /**< with wait_for_workers: how many clients the server waits for, or -1 */
  int64_t timeout_ms; /**< default timeout of blocking calls, and of connecting */
  int wait_for_workers;
} c10d_tcp_store_options;
#define C10D_TCP_STORE_OPTIONS_INIT \
  { sizeof(c10d_tcp_store_options), "127.0.0.1", 0, 0, -1, 300000, 0 }

C10D_C_EXPORT c10d_status c10d_store_tcp(const c10d_tcp_store_options* options, c10d_store** out);
/** A store in a file that every rank opens by path (num_workers: how many will, or -1). */
C10D_C_EXPORT c10d_status c10d_store_file(const char* path, int num_workers, int64_t timeout_ms,
                                          c10d_store** out);
/** A store inside this process (ranks as threads, tests). */
C10D_C_EXPORT c10d_status c10d_store_hash(c10d_store** out);
/** Keys of base under prefix + "/". base stays usable and may be freed before the result. */
C10D_C_EXPORT c10d_status c10d_store_prefix(const char* prefix, c10d_store* base, c10d_store** out);
/** The port a TCP store's server listens on, or the port a client connected to. */
C10D_C_EXPORT c10d_status c10d_store_port(c10d_store* store, uint16_t* port);

C10D_C_EXPORT c10d_status c10d_store_set(c10d_store* store, const char* key, const void* value,
                                         size_t size);
/** Waits up to timeout_ms (-1: the store's timeout) for key; value->data is for c10d_free. */
C10D_C_EXPORT c10d_status c10d_store_get(c10d_store* store, const char* key, int64_t timeout_ms,
                                         c10d_bytes* value);
C10D_C_EXPORT c10d_status c10d_store_add(c10d_store* store, const char* key, int64_t delta,
                                         int64_t* result);
/** PyTorch's compare_set: sets desired when key's value is expected (or key is absent and expected
 * is empty); result is the value key has afterwards (expected when absent). */
C10D_C_EXPORT c10d_status c10d_store_compare_set(c10d_store* store, const char* key,
                                                 const void* expected, size_t expected_size,
                                                 const void* desired, size_t desired_size,
                                                 c10d_bytes* result);
/** Waits up to timeout_ms (-1: the store's timeout) until every key exists. */
C10D_C_EXPORT c10d_status c10d_store_wait(c10d_store* store, const char* const* keys,
                                          size_t num_keys, int64_t timeout_ms);
C10D_C_EXPORT c10d_status c10d_store_check(c10d_store* store, const char* const* keys,
                                           size_t num_keys, int* all_exist);
C10D_C_EXPORT c10d_status c10d_store_delete(c10d_store* store, const char* key, int* existed);
C10D_C_EXPORT c10d_status c10d_store_num_keys(c10d_store* store, int64_t* count);
/** Queues (PyTorch 2.6's queue_push / queue_pop / queue_len): per key, values in first-in
 * first-out order, apart from the key's value; each value is popped once. */
C10D_C_EXPORT c10d_status c10d_store_queue_push(c10d_store* store, const char* key,
                                                const void* value, size_t size);
/** Pops key's front value into value (value->data is for c10d_free). timeout_ms -1: the store's
 * timeout, > 0: waits that long for a value, C10D_ERR_TIMEOUT when none came; 0: no wait, and
 * *popped says whether there was one (popped may be NULL otherwise). */
C10D_C_EXPORT c10d_status c10d_store_queue_pop(c10d_store* store, const char* key,
                                               int64_t timeout_ms, c10d_bytes* value, int* popped);
C10D_C_EXPORT c10d_status c10d_store_queue_len(c10d_store* store, const char* key, int64_t* length);
/** The store's default timeout of blocking calls (what timeout_ms -1 means), and setting it. */
C10D_C_EXPORT c10d_status c10d_store_timeout(c10d_store* store, int64_t* timeout_ms);
C10D_C_EXPORT c10d_status c10d_store_set_timeout(c10d_store* store, int64_t timeout_ms);
C10D_C_EXPORT void c10d_store_free(c10d_store* store);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_STORE_H */
