/* capi_test: the C API (c10d/capi/c10d.h) from a C99 program, one process per rank. Run it with
 * `c10drun --nproc-per-node N capi_test` for N >= 2 (MASTER_ADDR, MASTER_PORT, RANK and
 * WORLD_SIZE come from the launcher). Every result is checked against values computed here from
 * the rank and the world size alone; the values are small integers (or halves), so float32 and
 * float64 sums are exact.
 *
 * The first failing check ends the process with exit status 1 and
 *   capi_test: rank R: <what> (line L: <detail>): <c10d_last_error()>
 * on stderr; success prints "capi_test: rank R of N: K checks passed" and exits 0. */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <dlpack/dlpack.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c10d/capi/c10d.h"

#define MAX_RANKS 64
#define COUNT 4 /* elements of the small buffers */

static int g_rank = -1;
static int g_checks = 0;

/* ---- checking ---- */

static void fail_at(int line, const char* what, const char* format, ...) {
  char detail[512];
  const char* error = c10d_last_error();
  va_list args;
  va_start(args, format);
  vsnprintf(detail, sizeof detail, format, args);
  va_end(args);
  fprintf(stderr, "capi_test: rank %d: %s (line %d: %s): %s\n", g_rank, what, line, detail,
          error != NULL && error[0] != '\0' ? error : "(no c10d error)");
  exit(1);
}

/* Whether text contains needle, ignoring case. */
static int contains(const char* text, const char* needle) {
  size_t n = strlen(needle);
  for (; *text != '\0'; ++text) {
    size_t i = 0;
    while (i < n && text[i] != '\0' &&
           tolower((unsigned char)text[i]) == tolower((unsigned char)needle[i])) {
      ++i;
    }
    if (i == n) return 1;
  }
  return n == 0;
}

/* Whether text contains one of the '|'-separated needles, ignoring case. */
static int mentions_any(const char* text, const char* needles) {
  char needle[128];
  while (*needles != '\0') {
    size_t n = strcspn(needles, "|");
    if (n >= sizeof needle) n = sizeof needle - 1;
    memcpy(needle, needles, n);
    needle[n] = '\0';
    if (n > 0 && contains(text, needle)) return 1;
    needles += n;
    if (*needles == '|') ++needles;
  }
  return 0;
}

static void check_true(int line, int ok, const char* what) {
  ++g_checks;
  if (!ok) fail_at(line, what, "condition is false");
}

/* got must be want; a failure must also leave a message mentioning one of needles (NULL: any
 * nonempty message). */
static void check_status(int line, c10d_status got, c10d_status want, const char* needles,
                         const char* what) {
  const char* message;
  ++g_checks;
  if (got != want) {
    fail_at(line, what, "returned %s, expected %s", c10d_status_name(got), c10d_status_name(want));
  }
  if (want == C10D_OK) return;
  message = c10d_last_error();
  if (message == NULL || message[0] == '\0') fail_at(line, what, "failed without a message");
  if (needles != NULL && !mentions_any(message, needles)) {
    fail_at(line, what, "the message mentions none of '%s'", needles);
  }
}

static double element(int line, const char* what, c10d_dtype dtype, const void* data, int64_t i) {
  switch (dtype) {
    case C10D_FLOAT32:
      return ((const float*)data)[i];
    case C10D_FLOAT64:
      return ((const double*)data)[i];
    case C10D_INT64:
      return (double)((const int64_t*)data)[i];
    default:
      fail_at(line, what, "no reader for dtype %d", (int)dtype);
  }
  return 0.0;
}

/* data[i] must be want[i] within tolerance (relative, 0: exact) for every i < count. */
static void check_values(int line, const char* what, c10d_dtype dtype, const void* data,
                         const double* want, int64_t count, double tolerance) {
  int64_t i;
  ++g_checks;
  for (i = 0; i < count; ++i) {
    double got = element(line, what, dtype, data, i);
    double diff = got > want[i] ? got - want[i] : want[i] - got;
    double scale = want[i] < 0 ? -want[i] : want[i];
    if (diff > tolerance * (scale > 1.0 ? scale : 1.0)) {
      fail_at(line, what, "element %lld is %.9g, expected %.9g", (long long)i, got, want[i]);
    }
  }
}

/* value must hold exactly the size bytes of want; releases value. */
static void check_bytes(int line, const char* what, c10d_bytes* value, const char* want) {
  size_t size = strlen(want);
  ++g_checks;
  if (value->size != size || (size > 0 && memcmp(value->data, want, size) != 0)) {
    fail_at(line, what, "got %zu bytes '%.*s', expected '%s'", value->size,
            (int)(value->size < 64 ? value->size : 64), value->data ? (char*)value->data : "",
            want);
  }
  c10d_free(value->data);
  value->data = NULL;
}

#define CHECK(cond, what) check_true(__LINE__, (cond) ? 1 : 0, (what))
#define CHECK_OK(call, what) check_status(__LINE__, (call), C10D_OK, NULL, (what))
#define CHECK_FAILS(call, status, needles, what) \
  check_status(__LINE__, (call), (status), (needles), (what))
#define CHECK_VALUES(dtype, data, want, count, what) \
  check_values(__LINE__, (what), (dtype), (data), (want), (count), 0.0)
#define CHECK_BYTES(value, want, what) check_bytes(__LINE__, (what), &(value), (want))

/* ---- small helpers ---- */

static c10d_buffer cpu(void* data, int64_t count, c10d_dtype dtype) {
  c10d_buffer buffer;
  buffer.data = data;
  buffer.count = count;
  buffer.dtype = dtype;
  buffer.device_type = C10D_DEVICE_CPU;
  buffer.device_index = 0;
  buffer.stream = NULL;
  return buffer;
}

static c10d_op_options reduce_with(c10d_reduce_op op) {
  c10d_op_options options = C10D_OP_OPTIONS_INIT;
  options.reduce_op = op;
  return options;
}

static c10d_op_options rooted(int root) {
  c10d_op_options options = C10D_OP_OPTIONS_INIT;
  options.root = root;
  return options;
}

static c10d_op_options tagged(int tag) {
  c10d_op_options options = C10D_OP_OPTIONS_INIT;
  options.tag = tag;
  return options;
}

static void sleep_ms(long ms) {
  struct timespec delay;
  delay.tv_sec = ms / 1000;
  delay.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&delay, NULL);
}

static void barrier(c10d_group* group, const char* what) {
  CHECK_OK(c10d_barrier(group, NULL, NULL), what);
}

/* ---- library ---- */

static void test_library(void) {
  static const struct {
    c10d_status status;
    const char* name;
  } statuses[] = {{C10D_OK, "C10D_OK"},
                  {C10D_ERR_INVALID_ARGUMENT, "C10D_ERR_INVALID_ARGUMENT"},
                  {C10D_ERR_TIMEOUT, "C10D_ERR_TIMEOUT"},
                  {C10D_ERR_STORE, "C10D_ERR_STORE"},
                  {C10D_ERR_BACKEND, "C10D_ERR_BACKEND"},
                  {C10D_ERR_REMOTE, "C10D_ERR_REMOTE"},
                  {C10D_ERR_STATE, "C10D_ERR_STATE"},
                  {C10D_ERR_INTERNAL, "C10D_ERR_INTERNAL"}};
  static const struct {
    c10d_dtype dtype;
    const char* name;
    size_t size;
  } dtypes[] = {{C10D_FLOAT32, "float32", 4}, {C10D_FLOAT64, "float64", 8},
                {C10D_FLOAT16, "float16", 2}, {C10D_BFLOAT16, "bfloat16", 2},
                {C10D_INT8, "int8", 1},       {C10D_INT16, "int16", 2},
                {C10D_INT32, "int32", 4},     {C10D_INT64, "int64", 8},
                {C10D_UINT8, "uint8", 1},     {C10D_BOOL, "bool", 1}};
  size_t i;
  const char* error = c10d_last_error();

  CHECK(error != NULL && error[0] == '\0', "c10d_last_error() is \"\" before any call failed");
  CHECK(c10d_api_version() >= C10D_API_VERSION, "c10d_api_version() >= C10D_API_VERSION");
  for (i = 0; i < sizeof statuses / sizeof statuses[0]; ++i) {
    const char* name = c10d_status_name(statuses[i].status);
    CHECK(name != NULL && strcmp(name, statuses[i].name) == 0, statuses[i].name);
  }
  CHECK(strcmp(c10d_status_name((c10d_status)42), "unknown status") == 0,
        "c10d_status_name of an unlisted status is \"unknown status\"");
  for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; ++i) {
    const char* name = c10d_dtype_name(dtypes[i].dtype);
    CHECK(name != NULL && strcmp(name, dtypes[i].name) == 0, dtypes[i].name);
    CHECK(c10d_dtype_size(dtypes[i].dtype) == dtypes[i].size, dtypes[i].name);
  }
  CHECK(c10d_dtype_name((c10d_dtype)42) == NULL, "c10d_dtype_name of an unlisted dtype is NULL");
  c10d_free(NULL); /* ignored */
}

/* ---- process group ---- */

static c10d_group* init_world(int* rank, int* size) {
  c10d_init_options options = C10D_INIT_OPTIONS_INIT;
  const char* env_size = getenv("WORLD_SIZE");
  const char* env_backend = getenv("C10D_BACKEND");
  const char* backend;
  c10d_group* world = NULL;

  options.timeout_ms = 60000;
  CHECK_OK(c10d_group_init(&options, &world), "c10d_group_init from the environment");
  CHECK(world != NULL, "c10d_group_init returned a group");
  *rank = c10d_group_rank(world);
  *size = c10d_group_size(world);
  CHECK(*rank == g_rank, "c10d_group_rank is RANK");
  CHECK(env_size != NULL && *size == atoi(env_size), "c10d_group_size is WORLD_SIZE");
  CHECK(*size >= 2 && *size <= MAX_RANKS, "capi_test needs 2 to 64 ranks");
  CHECK(c10d_group_is_member(world) == 1, "the default group has every rank as a member");
  backend = c10d_group_backend(world);
  CHECK(backend != NULL && backend[0] != '\0', "c10d_group_backend is named");
  if (env_backend == NULL || env_backend[0] == '\0') {
    CHECK(strcmp(backend, "gloo") == 0, "without C10D_BACKEND the backend is gloo");
  }
  return world;
}

/* ---- stores ---- */

static void test_hash_store(c10d_store** hash_out, c10d_store** prefixed_out) {
  const char* both[2] = {"alpha", "counter"};
  const char* one_missing[2] = {"alpha", "capi_missing_key"};
  const char* never[1] = {"capi_never_key"};
  const char* cas_absent[1] = {"cas_absent"};
  c10d_store* store = NULL;
  c10d_store* prefixed = NULL;
  c10d_bytes value = {NULL, 0};
  int64_t number = 0;
  int flag = -1;

  CHECK_OK(c10d_store_hash(&store), "c10d_store_hash");
  CHECK_OK(c10d_store_set(store, "alpha", "one", 3), "store set alpha");
  CHECK_OK(c10d_store_get(store, "alpha", 1000, &value), "store get alpha");
  CHECK_BYTES(value, "one", "store get alpha returns what was set");

  CHECK_OK(c10d_store_add(store, "counter", 5, &number), "store add 5 to an absent key");
  CHECK(number == 5, "store add to an absent key starts from 0");
  CHECK_OK(c10d_store_add(store, "counter", -2, &number), "store add -2");
  CHECK(number == 3, "store add -2 to 5 gives 3");

  /* compare_set, as PyTorch's: absent with empty expected sets; a match sets; a mismatch keeps
   * the value and returns it; absent with nonempty expected stays absent and returns expected. */
  CHECK_OK(c10d_store_compare_set(store, "cas", "", 0, "first", 5, &value),
           "compare_set on an absent key with empty expected");
  CHECK_BYTES(value, "first", "compare_set absent/empty returns desired");
  CHECK_OK(c10d_store_compare_set(store, "cas", "first", 5, "second", 6, &value),
           "compare_set with the current value");
  CHECK_BYTES(value, "second", "compare_set match returns desired");
  CHECK_OK(c10d_store_compare_set(store, "cas", "nope", 4, "third", 5, &value),
           "compare_set with another value");
  CHECK_BYTES(value, "second", "compare_set mismatch returns the current value");
  CHECK_OK(c10d_store_get(store, "cas", 1000, &value), "store get cas");
  CHECK_BYTES(value, "second", "compare_set mismatch left the value");
  CHECK_OK(c10d_store_compare_set(store, "cas_absent", "x", 1, "y", 1, &value),
           "compare_set on an absent key with nonempty expected");
  CHECK_BYTES(value, "x", "compare_set absent/nonempty returns expected");

  CHECK_OK(c10d_store_check(store, both, 2, &flag), "store check of two keys set");
  CHECK(flag == 1, "store check finds alpha and counter");
  CHECK_OK(c10d_store_check(store, one_missing, 2, &flag), "store check with a missing key");
  CHECK(flag == 0, "store check reports a missing key");
  CHECK_OK(c10d_store_check(store, cas_absent, 1, &flag),
           "store check of the key compare_set left absent");
  CHECK(flag == 0, "compare_set with nonempty expected did not create an absent key");
  CHECK_OK(c10d_store_wait(store, both, 2, 1000), "store wait for keys that exist");
  CHECK_OK(c10d_store_num_keys(store, &number), "store num_keys");
  CHECK(number == 3, "store num_keys counts alpha, counter and cas");

  CHECK_FAILS(c10d_store_get(store, "capi_missing_key", 100, &value), C10D_ERR_TIMEOUT,
              "capi_missing_key", "store get of a missing key with a 100 ms timeout");
  CHECK_FAILS(c10d_store_wait(store, never, 1, 100), C10D_ERR_TIMEOUT, "capi_never_key",
              "store wait for a missing key with a 100 ms timeout");
  CHECK_OK(c10d_store_timeout(store, &number), "store timeout");
  CHECK(number == 300000, "a hash store's default timeout is 300 s");
  CHECK_OK(c10d_store_set_timeout(store, 100), "store set_timeout");
  CHECK_FAILS(c10d_store_wait(store, never, 1, -1), C10D_ERR_TIMEOUT, "capi_never_key",
              "store wait with the store's timeout (now 100 ms)");
  CHECK_FAILS(c10d_store_set_timeout(store, 0), C10D_ERR_INVALID_ARGUMENT, "timeout",
              "a zero store timeout is refused");
  CHECK_OK(c10d_store_set_timeout(store, 300000), "store set_timeout back");

  CHECK_OK(c10d_store_delete(store, "alpha", &flag), "store delete alpha");
  CHECK(flag == 1, "store delete of a key that existed says so");
  CHECK_OK(c10d_store_delete(store, "alpha", &flag), "store delete alpha again");
  CHECK(flag == 0, "store delete of an absent key says so");
  CHECK_OK(c10d_store_num_keys(store, &number), "store num_keys after delete");
  CHECK(number == 2, "store num_keys is 2 after deleting alpha");

  CHECK_OK(c10d_store_prefix("pre", store, &prefixed), "c10d_store_prefix");
  CHECK_OK(c10d_store_set(prefixed, "k", "v", 1), "prefix store set k");
  CHECK_OK(c10d_store_get(store, "pre/k", 1000, &value), "base store get pre/k");
  CHECK_BYTES(value, "v", "a prefix store's key k is pre/k in its base");
  CHECK_OK(c10d_store_set(store, "pre/j", "w", 1), "base store set pre/j");
  CHECK_OK(c10d_store_get(prefixed, "j", 1000, &value), "prefix store get j");
  CHECK_BYTES(value, "w", "the base's pre/j is the prefix store's j");
  CHECK_OK(c10d_store_add(prefixed, "n", 7, &number), "prefix store add");
  CHECK_OK(c10d_store_add(store, "pre/n", 1, &number), "base store add pre/n");
  CHECK(number == 8, "a prefix store's counter n is pre/n in its base");

  /* Queues: first in, first out, apart from the key's value; a pop without waiting says when
   * the queue was empty, a waiting one times out naming it. */
  CHECK_OK(c10d_store_queue_push(store, "q", "one", 3), "queue push one");
  CHECK_OK(c10d_store_queue_push(prefixed, "q", "inner", 5), "prefix store queue push");
  CHECK_OK(c10d_store_queue_push(store, "q", "two", 3), "queue push two");
  CHECK_OK(c10d_store_queue_len(store, "q", &number), "queue len");
  CHECK(number == 2, "queue len counts both pushes");
  CHECK_OK(c10d_store_queue_len(store, "pre/q", &number), "queue len of the prefixed queue");
  CHECK(number == 1, "the prefix store's queue q is pre/q in its base");
  CHECK_OK(c10d_store_queue_pop(store, "q", -1, &value, &flag), "queue pop");
  CHECK(flag == 1, "a pop of a non-empty queue says it popped");
  CHECK_BYTES(value, "one", "queue pop returns the first push");
  CHECK_OK(c10d_store_queue_pop(store, "q", 0, &value, &flag), "queue pop without waiting");
  CHECK_BYTES(value, "two", "queue pop returns the second push");
  CHECK_OK(c10d_store_queue_pop(store, "q", 0, &value, &flag), "queue pop of an empty queue");
  CHECK(flag == 0, "a pop without waiting of an empty queue says it popped nothing");
  CHECK_BYTES(value, "", "a pop without waiting of an empty queue pops nothing");
  CHECK_FAILS(c10d_store_queue_pop(store, "q", 100, &value, NULL), C10D_ERR_TIMEOUT, "'q'",
              "queue pop of an empty queue with a 100 ms timeout");
  CHECK_FAILS(c10d_store_queue_pop(store, "q", 0, &value, NULL), C10D_ERR_INVALID_ARGUMENT,
              "popped", "a pop without waiting needs popped");
  CHECK_FAILS(c10d_store_queue_push(store, "", "x", 1), C10D_ERR_INVALID_ARGUMENT, "key",
              "queue push with an empty key");

  *hash_out = store;
  *prefixed_out = prefixed;
}

static c10d_store* test_tcp_store(c10d_group* world, int rank, int size) {
  c10d_tcp_store_options options = C10D_TCP_STORE_OPTIONS_INIT;
  const char* addr = getenv("MASTER_ADDR");
  const char* released[1] = {"capi/released"};
  c10d_store* store = NULL;
  c10d_op_options from0 = rooted(0);
  c10d_buffer port_buffer;
  c10d_bytes value = {NULL, 0};
  int64_t port = -1, count = 0;
  uint16_t own = 0;
  int polls;

  options.host = addr != NULL && addr[0] != '\0' ? addr : "127.0.0.1";
  options.timeout_ms = 60000;
  if (rank == 0) {
    options.is_server = 1;
    options.port = 0;
    CHECK_OK(c10d_store_tcp(&options, &store), "TCP store server on port 0");
    CHECK_OK(c10d_store_port(store, &own), "c10d_store_port of the server");
    CHECK(own != 0, "a server asked for port 0 listens on a real port");
    port = own;
  }
  port_buffer = cpu(&port, 1, C10D_INT64);
  CHECK_OK(c10d_broadcast(world, &port_buffer, &from0, NULL), "broadcast the TCP store's port");
  CHECK(port > 0 && port < 65536, "the broadcast port is a port");
  if (rank != 0) {
    options.port = (uint16_t)port;
    CHECK_OK(c10d_store_tcp(&options, &store), "TCP store client");
    CHECK_OK(c10d_store_port(store, &own), "c10d_store_port of a client");
    CHECK(own == port, "a client's port is the server's");
  }

  CHECK_OK(c10d_store_add(store, "capi/arrived", 1, &count), "TCP store add to the counter");
  CHECK(count >= 1 && count <= size, "the counter is between 1 and size");
  if (rank == 0) {
    for (polls = 0; count < size && polls < 6000; ++polls) {
      sleep_ms(10);
      CHECK_OK(c10d_store_add(store, "capi/arrived", 0, &count), "TCP store read the counter");
    }
    CHECK(count == size, "every rank added to the TCP store's counter within 60 s");
    CHECK_OK(c10d_store_set(store, "capi/released", "go", 2), "TCP store set released");
  }
  CHECK_OK(c10d_store_wait(store, released, 1, 60000), "TCP store wait for released");
  CHECK_OK(c10d_store_get(store, "capi/released", -1, &value), "TCP store get released");
  CHECK_BYTES(value, "go", "TCP store: released is what rank 0 set");
  CHECK_OK(c10d_store_add(store, "capi/arrived", 0, &count), "TCP store counter after release");
  CHECK(count == size, "the TCP store's counter is size");
  return store;
}

static c10d_store* test_file_store(c10d_group* world, int rank, int size) {
  const char* port = getenv("MASTER_PORT");
  char path[256], key[32], want[32];
  const char* keys[MAX_RANKS];
  char names[MAX_RANKS][32];
  c10d_store* store = NULL;
  c10d_bytes value = {NULL, 0};
  int64_t count = 0;
  int q;

  snprintf(path, sizeof path, "/tmp/c10d_capi_test_%s.store", port != NULL ? port : "0");
  if (rank == 0) unlink(path); /* a leftover of an earlier run with the same port */
  barrier(world, "barrier before opening the file store");
  CHECK_OK(c10d_store_file(path, size, 60000, &store), "c10d_store_file");
  snprintf(key, sizeof key, "file/%d", rank);
  snprintf(want, sizeof want, "rank %d", rank);
  CHECK_OK(c10d_store_set(store, key, want, strlen(want)), "file store set own key");
  CHECK_OK(c10d_store_add(store, "file/count", 1, &count), "file store add");
  CHECK(count >= 1 && count <= size, "the file store's counter is between 1 and size");
  for (q = 0; q < size; ++q) {
    snprintf(names[q], sizeof names[q], "file/%d", q);
    keys[q] = names[q];
  }
  CHECK_OK(c10d_store_wait(store, keys, (size_t)size, 60000), "file store wait for every rank");
  for (q = 0; q < size; ++q) {
    snprintf(want, sizeof want, "rank %d", q);
    CHECK_OK(c10d_store_get(store, keys[q], -1, &value), "file store get a rank's key");
    CHECK_BYTES(value, want, "file store: a rank's key holds what it set");
  }
  return store;
}

/* ---- collectives ---- */

static void test_broadcast_and_allreduce(c10d_group* g, int rank, int size) {
  float x[COUNT];
  double d[COUNT], want[COUNT];
  c10d_buffer b = cpu(x, COUNT, C10D_FLOAT32);
  c10d_buffer bd = cpu(d, COUNT, C10D_FLOAT64);
  c10d_op_options options = rooted(size - 1);
  int i, q;

  for (i = 0; i < COUNT; ++i) {
    x[i] = rank == size - 1 ? (float)(size + i) : -1.0f;
    want[i] = size + i;
  }
  CHECK_OK(c10d_broadcast(g, &b, &options, NULL), "broadcast from the last rank");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "broadcast from the last rank");

  /* x[i] = rank + 1 + i on every rank, for every reduction */
#define FILL_X() \
  for (i = 0; i < COUNT; ++i) x[i] = (float)(rank + 1 + i)

  FILL_X();
  options = reduce_with(C10D_SUM);
  for (i = 0; i < COUNT; ++i) {
    want[i] = 0;
    for (q = 0; q < size; ++q) want[i] += q + 1 + i;
  }
  CHECK_OK(c10d_allreduce(g, &b, &options, NULL), "allreduce SUM");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "allreduce SUM");

  FILL_X();
  options = reduce_with(C10D_AVG);
  for (i = 0; i < COUNT; ++i) want[i] /= size;
  CHECK_OK(c10d_allreduce(g, &b, &options, NULL), "allreduce AVG");
  check_values(__LINE__, "allreduce AVG", C10D_FLOAT32, x, want, COUNT, 1e-6);

  FILL_X();
  options = reduce_with(C10D_PREMUL_SUM);
  options.premul_factor = 0.5;
  for (i = 0; i < COUNT; ++i) want[i] = want[i] * size * 0.5;
  CHECK_OK(c10d_allreduce(g, &b, &options, NULL), "allreduce PREMUL_SUM 0.5");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "allreduce PREMUL_SUM 0.5");

  FILL_X();
  options = reduce_with(C10D_MAX);
  for (i = 0; i < COUNT; ++i) want[i] = size + i;
  CHECK_OK(c10d_allreduce(g, &b, &options, NULL), "allreduce MAX");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "allreduce MAX");

  FILL_X();
  options = reduce_with(C10D_MIN);
  for (i = 0; i < COUNT; ++i) want[i] = 1 + i;
  CHECK_OK(c10d_allreduce(g, &b, &options, NULL), "allreduce MIN");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "allreduce MIN");
#undef FILL_X

  options = reduce_with(C10D_PRODUCT);
  for (i = 0; i < COUNT; ++i) {
    d[i] = rank + 1 + i;
    want[i] = 1;
    for (q = 0; q < size; ++q) want[i] *= q + 1 + i;
  }
  CHECK_OK(c10d_allreduce(g, &bd, &options, NULL), "allreduce PRODUCT float64");
  CHECK_VALUES(C10D_FLOAT64, d, want, COUNT, "allreduce PRODUCT float64");
}

static void test_coalesced_and_reduce(c10d_group* g, int rank, int size) {
  float a[3], c[5], x[COUNT];
  double want_a[3], want_c[5], want[COUNT];
  c10d_buffer buffers[2];
  c10d_buffer b = cpu(x, COUNT, C10D_FLOAT32);
  c10d_op_options to0 = rooted(0);
  int i, q;

  for (i = 0; i < 3; ++i) a[i] = (float)(rank + 1 + i);
  for (i = 0; i < 5; ++i) c[i] = (float)(2 * (rank + 1) + i);
  for (i = 0; i < 3; ++i) {
    want_a[i] = 0;
    for (q = 0; q < size; ++q) want_a[i] += q + 1 + i;
  }
  for (i = 0; i < 5; ++i) {
    want_c[i] = 0;
    for (q = 0; q < size; ++q) want_c[i] += 2 * (q + 1) + i;
  }
  buffers[0] = cpu(a, 3, C10D_FLOAT32);
  buffers[1] = cpu(c, 5, C10D_FLOAT32);
  CHECK_OK(c10d_allreduce_coalesced(g, buffers, 2, NULL, NULL), "allreduce_coalesced");
  CHECK_VALUES(C10D_FLOAT32, a, want_a, 3, "allreduce_coalesced buffer 0");
  CHECK_VALUES(C10D_FLOAT32, c, want_c, 5, "allreduce_coalesced buffer 1");

  /* A coalescing block: two allreduces held (the call without a handle returns at once), then
   * run as one at its end; what cannot be coalesced is refused and the block goes on. */
  for (i = 0; i < 3; ++i) a[i] = (float)(rank + 1 + i);
  for (i = 0; i < 5; ++i) c[i] = (float)(2 * (rank + 1) + i);
  {
    c10d_work* fused = NULL;
    CHECK_OK(c10d_group_start_coalescing(g), "start coalescing");
    CHECK_FAILS(c10d_group_start_coalescing(g), C10D_ERR_INVALID_ARGUMENT, "do not nest",
                "a second start");
    CHECK_OK(c10d_allreduce(g, &buffers[0], NULL, NULL), "a held allreduce");
    CHECK_OK(c10d_allreduce(g, &buffers[1], NULL, NULL), "another held allreduce");
    CHECK_FAILS(c10d_broadcast(g, &buffers[0], &to0, NULL), C10D_ERR_INVALID_ARGUMENT,
                "allreduces only", "a broadcast inside a coalescing block");
    CHECK_OK(c10d_group_end_coalescing(g, &fused), "end coalescing");
    CHECK_OK(c10d_work_wait(fused, -1), "wait for the fused allreduce");
    c10d_work_free(fused);
    CHECK_VALUES(C10D_FLOAT32, a, want_a, 3, "coalesced allreduce buffer 0");
    CHECK_VALUES(C10D_FLOAT32, c, want_c, 5, "coalesced allreduce buffer 1");
    CHECK_FAILS(c10d_group_end_coalescing(g, NULL), C10D_ERR_INVALID_ARGUMENT,
                "no coalescing block", "an end without a start");
  }

  for (i = 0; i < COUNT; ++i) {
    x[i] = (float)(rank + 1 + i);
    want[i] = 0;
    for (q = 0; q < size; ++q) want[i] += q + 1 + i;
  }
  CHECK_OK(c10d_reduce(g, &b, &to0, NULL), "reduce SUM to rank 0");
  if (rank == 0) CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "reduce SUM on the root");
}

static void test_gathers(c10d_group* g, int rank, int size) {
  int64_t in64[3], out64[MAX_RANKS][3];
  float in[3], flat[MAX_RANKS * 3], parts[MAX_RANKS][3];
  double want[MAX_RANKS * 3];
  c10d_buffer outputs[MAX_RANKS];
  c10d_buffer input64 = cpu(in64, 3, C10D_INT64);
  c10d_buffer input = cpu(in, 3, C10D_FLOAT32);
  c10d_buffer output = cpu(flat, 3 * size, C10D_FLOAT32);
  c10d_op_options options = rooted(0);
  int i, p;

  memset(outputs, 0, sizeof outputs); /* only size of them are used */
  for (i = 0; i < 3; ++i) in64[i] = 100 * rank + i;
  for (p = 0; p < size; ++p) {
    for (i = 0; i < 3; ++i) out64[p][i] = -1;
    outputs[p] = cpu(out64[p], 3, C10D_INT64);
  }
  CHECK_OK(c10d_allgather(g, outputs, (size_t)size, &input64, NULL, NULL), "allgather int64");
  for (p = 0; p < size; ++p) {
    for (i = 0; i < 3; ++i) want[i] = 100 * p + i;
    CHECK_VALUES(C10D_INT64, out64[p], want, 3, "allgather: outputs[r] holds rank r's input");
  }

  for (i = 0; i < 3; ++i) in[i] = (float)(10 * rank + i) + 0.5f;
  for (i = 0; i < 3 * size; ++i) {
    flat[i] = -1.0f;
    want[i] = 10 * (i / 3) + i % 3 + 0.5;
  }
  CHECK_OK(c10d_allgather_into_tensor(g, &output, &input, NULL, NULL), "allgather_into_tensor");
  CHECK_VALUES(C10D_FLOAT32, flat, want, 3 * size, "allgather_into_tensor");
  /* The former name, kept deprecated for one release, is the same call. */
  for (i = 0; i < 3 * size; ++i) flat[i] = -1.0f;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK_OK(c10d_allgather_into(g, &output, &input, NULL, NULL), "allgather_into (deprecated)");
#pragma GCC diagnostic pop
  CHECK_VALUES(C10D_FLOAT32, flat, want, 3 * size, "allgather_into (deprecated)");

  for (p = 0; p < size; ++p) {
    for (i = 0; i < 3; ++i) parts[p][i] = -1.0f;
    outputs[p] = cpu(parts[p], 3, C10D_FLOAT32);
  }
  if (rank == 0) {
    CHECK_OK(c10d_gather(g, outputs, (size_t)size, &input, &options, NULL), "gather to rank 0");
    for (p = 0; p < size; ++p) {
      CHECK_VALUES(C10D_FLOAT32, parts[p], want + 3 * p, 3, "gather: outputs[r] is rank r's");
    }
  } else {
    CHECK_OK(c10d_gather(g, NULL, 0, &input, &options, NULL), "gather from a non-root");
  }

  /* scatter from the last rank: rank p gets 7 * p + i + 1 */
  options = rooted(size - 1);
  for (p = 0; p < size; ++p) {
    for (i = 0; i < 3; ++i) parts[p][i] = (float)(7 * p + i + 1);
    outputs[p] = cpu(parts[p], 3, C10D_FLOAT32);
  }
  for (i = 0; i < 3; ++i) {
    in[i] = -1.0f;
    want[i] = 7 * rank + i + 1;
  }
  if (rank == size - 1) {
    CHECK_OK(c10d_scatter(g, &input, outputs, (size_t)size, &options, NULL), "scatter (root)");
  } else {
    CHECK_OK(c10d_scatter(g, &input, NULL, 0, &options, NULL), "scatter (non-root)");
  }
  CHECK_VALUES(C10D_FLOAT32, in, want, 3, "scatter: rank r gets the root's inputs[r]");
}

static void test_reduce_scatter(c10d_group* g, int rank, int size) {
  float parts[MAX_RANKS][2], flat[MAX_RANKS * 2], out[2];
  double want[2];
  c10d_buffer inputs[MAX_RANKS];
  c10d_buffer output = cpu(out, 2, C10D_FLOAT32);
  c10d_buffer input = cpu(flat, 2 * size, C10D_FLOAT32);
  int i, p, q;

  /* rank q's part for rank p: (q + 1) * (p + 1) + i */
  for (p = 0; p < size; ++p) {
    for (i = 0; i < 2; ++i) {
      parts[p][i] = (float)((rank + 1) * (p + 1) + i);
      flat[2 * p + i] = parts[p][i];
    }
    inputs[p] = cpu(parts[p], 2, C10D_FLOAT32);
  }
  for (i = 0; i < 2; ++i) {
    want[i] = 0;
    for (q = 0; q < size; ++q) want[i] += (q + 1) * (rank + 1) + i;
  }
  out[0] = out[1] = -1.0f;
  CHECK_OK(c10d_reduce_scatter(g, &output, inputs, (size_t)size, NULL, NULL), "reduce_scatter");
  CHECK_VALUES(C10D_FLOAT32, out, want, 2, "reduce_scatter");
  out[0] = out[1] = -1.0f;
  CHECK_OK(c10d_reduce_scatter_tensor(g, &output, &input, NULL, NULL), "reduce_scatter_tensor");
  CHECK_VALUES(C10D_FLOAT32, out, want, 2, "reduce_scatter_tensor");
}

static void test_alltoall(c10d_group* g, int rank, int size) {
  float in[MAX_RANKS][2], out[MAX_RANKS][2];
  float flat_in[MAX_RANKS * (MAX_RANKS + 1) / 2], flat_out[MAX_RANKS * MAX_RANKS];
  double want[MAX_RANKS * MAX_RANKS];
  int64_t input_splits[MAX_RANKS], output_splits[MAX_RANKS];
  c10d_buffer inputs[MAX_RANKS], outputs[MAX_RANKS], input, output;
  int64_t n = 0;
  int i, p;

  memset(inputs, 0, sizeof inputs); /* only size of them are used */
  memset(outputs, 0, sizeof outputs);
  /* rank r's element i for rank p: 100 r + 10 p + i */
  for (p = 0; p < size; ++p) {
    for (i = 0; i < 2; ++i) {
      in[p][i] = (float)(100 * rank + 10 * p + i);
      out[p][i] = -1.0f;
      flat_in[2 * p + i] = in[p][i];
      flat_out[2 * p + i] = -1.0f;
      want[2 * p + i] = 100 * p + 10 * rank + i;
    }
    inputs[p] = cpu(in[p], 2, C10D_FLOAT32);
    outputs[p] = cpu(out[p], 2, C10D_FLOAT32);
  }
  CHECK_OK(c10d_alltoall(g, outputs, (size_t)size, inputs, (size_t)size, NULL, NULL), "alltoall");
  for (p = 0; p < size; ++p) {
    CHECK_VALUES(C10D_FLOAT32, out[p], want + 2 * p, 2, "alltoall: outputs[p] is p's inputs[r]");
  }
  input = cpu(flat_in, 2 * size, C10D_FLOAT32);
  output = cpu(flat_out, 2 * size, C10D_FLOAT32);
  CHECK_OK(c10d_alltoall_base(g, &output, &input, NULL, NULL, 0, NULL, NULL),
           "alltoall_base with equal splits");
  CHECK_VALUES(C10D_FLOAT32, flat_out, want, 2 * size, "alltoall_base with equal splits");

  /* Uneven: rank r sends p + 1 elements to rank p and receives r + 1 from each. */
  for (p = 0; p < size; ++p) {
    input_splits[p] = p + 1;
    output_splits[p] = rank + 1;
    for (i = 0; i <= p; ++i) flat_in[n++] = (float)(100 * rank + 10 * p + i);
    for (i = 0; i <= rank; ++i) {
      flat_out[p * (rank + 1) + i] = -1.0f;
      want[p * (rank + 1) + i] = 100 * p + 10 * rank + i;
    }
  }
  input = cpu(flat_in, n, C10D_FLOAT32);
  output = cpu(flat_out, (int64_t)size * (rank + 1), C10D_FLOAT32);
  CHECK_OK(
      c10d_alltoall_base(g, &output, &input, output_splits, input_splits, (size_t)size, NULL, NULL),
      "alltoall_base with uneven splits");
  CHECK_VALUES(C10D_FLOAT32, flat_out, want, (int64_t)size * (rank + 1),
               "alltoall_base with uneven splits");

  barrier(g, "barrier");
  CHECK_OK(c10d_monitored_barrier(g, 60000, 0), "monitored_barrier");
  CHECK_OK(c10d_monitored_barrier(g, 60000, 1), "monitored_barrier with wait_all");
}

/* ---- work: asynchronous operations and callbacks ---- */

typedef struct callback_record {
  int calls; /* written with __sync_fetch_and_add after status and message */
  c10d_status status;
  char message[512];
} callback_record;

static void record_completion(void* user, c10d_status status, const char* message) {
  callback_record* record = (callback_record*)user;
  record->status = status;
  snprintf(record->message, sizeof record->message, "%s", message != NULL ? message : "(NULL)");
  __sync_fetch_and_add(&record->calls, 1); /* a full barrier: the fields above come first */
}

/* The callback's call count once it has run (or after 5 s). */
static int calls_after_waiting(callback_record* record) {
  int waited;
  for (waited = 0; __sync_fetch_and_add(&record->calls, 0) == 0 && waited < 5000; ++waited) {
    sleep_ms(1);
  }
  return __sync_fetch_and_add(&record->calls, 0);
}

static void test_async(c10d_group* g, int rank, int size) {
  float x[COUNT];
  int64_t in[2], out[MAX_RANKS][2];
  double want[COUNT];
  c10d_buffer b = cpu(x, COUNT, C10D_FLOAT32);
  c10d_buffer input = cpu(in, 2, C10D_INT64);
  c10d_buffer outputs[MAX_RANKS];
  c10d_op_options from0 = rooted(0);
  callback_record record = {0, C10D_ERR_INTERNAL, ""};
  callback_record late = {0, C10D_ERR_INTERNAL, ""};
  c10d_work* work = NULL;
  int completed = 0, polls, i, p, q;

  /* allreduce: poll with c10d_work_is_completed, then wait */
  for (i = 0; i < COUNT; ++i) {
    x[i] = (float)(rank + 1 + i);
    want[i] = 0;
    for (q = 0; q < size; ++q) want[i] += q + 1 + i;
  }
  CHECK_OK(c10d_allreduce(g, &b, NULL, &work), "async allreduce");
  CHECK(work != NULL, "async allreduce returns a work");
  CHECK_OK(c10d_work_on_completion(work, record_completion, &record),
           "c10d_work_on_completion on an async allreduce");
  for (polls = 0; polls < 60000; ++polls) {
    CHECK_OK(c10d_work_is_completed(work, &completed),
             "c10d_work_is_completed of an async allreduce");
    if (completed) break;
    sleep_ms(1);
  }
  CHECK(completed == 1, "the async allreduce completed within 60 s by c10d_work_is_completed");
  CHECK_OK(c10d_work_wait(work, -1), "c10d_work_wait of the async allreduce");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "async allreduce");
  CHECK(calls_after_waiting(&record) == 1, "the completion callback ran");
  CHECK(record.status == C10D_OK, "the completion callback got C10D_OK");
  CHECK(record.message[0] == '\0', "the completion callback's message is \"\" on success");
  sleep_ms(20);
  CHECK(__sync_fetch_and_add(&record.calls, 0) == 1, "the completion callback ran once");
  /* On a work that has completed, the callback runs at once on this thread. */
  CHECK_OK(c10d_work_on_completion(work, record_completion, &late),
           "c10d_work_on_completion on a completed work");
  CHECK(__sync_fetch_and_add(&late.calls, 0) == 1 && late.status == C10D_OK,
        "a callback on a completed work ran before c10d_work_on_completion returned");
  c10d_work_free(work);

  /* broadcast: wait with a timeout long enough */
  for (i = 0; i < COUNT; ++i) {
    x[i] = rank == 0 ? (float)(i + 0.5) : -1.0f;
    want[i] = i + 0.5;
  }
  work = NULL;
  CHECK_OK(c10d_broadcast(g, &b, &from0, &work), "async broadcast");
  CHECK_OK(c10d_work_wait(work, 60000), "c10d_work_wait(60 s) of the async broadcast");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "async broadcast from rank 0");
  c10d_work_free(work);

  /* allgather: wait, then test says completed */
  for (i = 0; i < 2; ++i) in[i] = 1000 * rank + i;
  for (p = 0; p < size; ++p) {
    out[p][0] = out[p][1] = -1;
    outputs[p] = cpu(out[p], 2, C10D_INT64);
  }
  work = NULL;
  CHECK_OK(c10d_allgather(g, outputs, (size_t)size, &input, NULL, &work), "async allgather");
  CHECK_OK(c10d_work_wait(work, -1), "c10d_work_wait of the async allgather");
  completed = 0;
  CHECK_OK(c10d_work_is_completed(work, &completed), "c10d_work_is_completed after wait");
  CHECK(completed == 1, "a waited work tests completed");
  completed = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK_OK(c10d_work_test(work, &completed), "c10d_work_test (deprecated) after wait");
#pragma GCC diagnostic pop
  CHECK(completed == 1, "the deprecated c10d_work_test says completed too");
  for (p = 0; p < size; ++p) {
    want[0] = 1000 * p;
    want[1] = 1000 * p + 1;
    CHECK_VALUES(C10D_INT64, out[p], want, 2, "async allgather");
  }
  c10d_work_free(work);
}

/* ---- point-to-point ---- */

static void test_p2p(c10d_group* g, int rank, int size) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  float out[COUNT], in[COUNT];
  double want[COUNT];
  c10d_buffer bout = cpu(out, COUNT, C10D_FLOAT32);
  c10d_buffer bin = cpu(in, COUNT, C10D_FLOAT32);
  c10d_op_options options = tagged(7);
  c10d_p2p_op ops[2];
  c10d_work* works[2] = {NULL, NULL};
  c10d_work* work = NULL;
  int seen[MAX_RANKS];
  int completed = -1, i, k, source;

#define RESET_RING()                 \
  for (i = 0; i < COUNT; ++i) {      \
    out[i] = (float)(10 * rank + i); \
    in[i] = -1.0f;                   \
    want[i] = 10 * prev + i;         \
  }

  /* ring with an async send: nothing can deadlock */
  RESET_RING();
  CHECK_OK(c10d_send(g, &bout, next, &options, &work), "async send tag 7 to the next rank");
  CHECK_OK(c10d_recv(g, &bin, prev, &options, NULL), "recv tag 7 from the previous rank");
  CHECK_OK(c10d_work_wait(work, -1), "wait for the send tag 7");
  c10d_work_free(work);
  CHECK_VALUES(C10D_FLOAT32, in, want, COUNT, "ring send/recv tag 7");

  /* ring, blocking both ways: even ranks send first, odd ranks receive first */
  RESET_RING();
  options = tagged(6);
  if (rank % 2 == 0) {
    CHECK_OK(c10d_send(g, &bout, next, &options, NULL), "blocking send tag 6 (even rank)");
    CHECK_OK(c10d_recv(g, &bin, prev, &options, NULL), "blocking recv tag 6 (even rank)");
  } else {
    CHECK_OK(c10d_recv(g, &bin, prev, &options, NULL), "blocking recv tag 6 (odd rank)");
    CHECK_OK(c10d_send(g, &bout, next, &options, NULL), "blocking send tag 6 (odd rank)");
  }
  CHECK_VALUES(C10D_FLOAT32, in, want, COUNT, "blocking ring send/recv tag 6");

  /* recv_anysource: rank 0 hears from every other rank once, in whatever order */
  options = tagged(8);
  if (rank == 0) {
    memset(seen, 0, sizeof seen);
    for (k = 1; k < size; ++k) {
      for (i = 0; i < COUNT; ++i) in[i] = -1.0f;
      work = NULL;
      source = -1;
      CHECK_OK(c10d_recv_anysource(g, &bin, &options, &work), "recv_anysource tag 8");
      CHECK_OK(c10d_work_wait(work, -1), "wait for recv_anysource tag 8");
      CHECK_OK(c10d_work_source_rank(work, &source), "c10d_work_source_rank of recv_anysource");
      c10d_work_free(work);
      CHECK(source >= 1 && source < size && !seen[source],
            "recv_anysource's source is a rank from 1 to size - 1 not seen before");
      seen[source] = 1;
      for (i = 0; i < COUNT; ++i) want[i] = 10 * source + i;
      CHECK_VALUES(C10D_FLOAT32, in, want, COUNT, "recv_anysource: the data is its source's");
    }
  } else {
    for (i = 0; i < COUNT; ++i) out[i] = (float)(10 * rank + i);
    CHECK_OK(c10d_send(g, &bout, 0, &options, NULL), "send tag 8 to rank 0 for recv_anysource");
  }

  /* batch_isend_irecv: a ring, with works and then blocking */
  RESET_RING();
  ops[0].kind = C10D_P2P_SEND;
  ops[0].buffer = bout;
  ops[0].peer = next;
  ops[0].tag = 11;
  ops[1].kind = C10D_P2P_RECV;
  ops[1].buffer = bin;
  ops[1].peer = prev;
  ops[1].tag = 11;
  CHECK_OK(c10d_batch_isend_irecv(g, ops, 2, 60000, works), "batch_isend_irecv with works");
  CHECK(works[0] != NULL && works[1] != NULL, "batch_isend_irecv returns a work per op");
  for (k = 0; k < 2; ++k) {
    CHECK_OK(c10d_work_wait(works[k], -1), "wait for a batch_isend_irecv work");
    c10d_work_free(works[k]);
  }
  CHECK_VALUES(C10D_FLOAT32, in, want, COUNT, "batch_isend_irecv ring with works");

  RESET_RING();
  ops[0].tag = ops[1].tag = 12;
  CHECK_OK(c10d_batch_isend_irecv(g, ops, 2, -1, NULL), "blocking batch_isend_irecv");
  CHECK_VALUES(C10D_FLOAT32, in, want, COUNT, "blocking batch_isend_irecv ring");
#undef RESET_RING

  /* A wait shorter than the op gives up with C10D_ERR_TIMEOUT and leaves the op running. */
  options = tagged(13);
  if (rank == 0) {
    for (i = 0; i < COUNT; ++i) {
      in[i] = -1.0f;
      want[i] = 10 + i;
    }
    work = NULL;
    CHECK_OK(c10d_recv(g, &bin, 1, &options, &work), "async recv tag 13 from rank 1");
    CHECK_FAILS(c10d_work_wait(work, 100), C10D_ERR_TIMEOUT, NULL,
                "c10d_work_wait(100 ms) of a recv whose sender waits");
    CHECK_OK(c10d_work_is_completed(work, &completed),
             "c10d_work_is_completed of a recv still waiting");
    CHECK(completed == 0, "a wait that timed out left the recv running");
  }
  barrier(g, "barrier releasing the sender of tag 13");
  if (rank == 1) {
    for (i = 0; i < COUNT; ++i) out[i] = (float)(10 + i);
    CHECK_OK(c10d_send(g, &bout, 0, &options, NULL), "send tag 13 to rank 0");
  }
  if (rank == 0) {
    CHECK_OK(c10d_work_wait(work, -1), "c10d_work_wait of the recv tag 13 after the send");
    CHECK_VALUES(C10D_FLOAT32, in, want, COUNT, "recv tag 13 after a timed-out wait");
    c10d_work_free(work);
  }
}

/* ---- subgroups ---- */

static void test_subgroups(c10d_group* g, int rank, int size) {
  c10d_group_options options = C10D_GROUP_OPTIONS_INIT;
  int evens[MAX_RANKS];
  size_t num_evens = 0;
  c10d_group* even = NULL;
  c10d_group* parity = NULL;
  c10d_group* without0 = NULL;
  float x[1];
  double want[1];
  c10d_buffer b = cpu(x, 1, C10D_FLOAT32);
  int q, higher = 0, same = 0;

  for (q = 0; q < size; q += 2) evens[num_evens++] = q;
  options.group_name = "capi_evens";
  CHECK_OK(c10d_group_new(g, evens, num_evens, &options, &even), "c10d_group_new of even ranks");
  x[0] = (float)(rank + 1);
  if (rank % 2 == 0) {
    CHECK(c10d_group_is_member(even) == 1, "an even rank is a member of the even group");
    CHECK(c10d_group_rank(even) == rank / 2, "the even group's rank is rank / 2");
    CHECK(c10d_group_size(even) == (int)num_evens, "the even group's size");
    want[0] = 0;
    for (q = 0; q < size; q += 2) want[0] += q + 1;
    CHECK_OK(c10d_allreduce(even, &b, NULL, NULL), "allreduce in the even group");
    CHECK_VALUES(C10D_FLOAT32, x, want, 1, "allreduce in the even group sums even ranks + 1");
  } else {
    CHECK(c10d_group_is_member(even) == 0, "an odd rank is not a member of the even group");
    CHECK_FAILS(c10d_allreduce(even, &b, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, "member",
                "allreduce in a group this rank is not a member of");
  }

  /* split by parity, ordered by -rank: the highest rank of a parity is its rank 0 */
  CHECK_OK(c10d_group_split(g, rank % 2, -rank, NULL, &parity), "c10d_group_split by parity");
  want[0] = 0;
  for (q = 0; q < size; ++q) {
    if (q % 2 != rank % 2) continue;
    ++same;
    if (q > rank) ++higher;
    want[0] += q + 1;
  }
  CHECK(c10d_group_is_member(parity) == 1, "every rank is in its parity group");
  CHECK(c10d_group_size(parity) == same, "the parity group's size");
  CHECK(c10d_group_rank(parity) == higher, "the parity group is ordered by key -rank");
  x[0] = (float)(rank + 1);
  CHECK_OK(c10d_allreduce(parity, &b, NULL, NULL), "allreduce in the parity group");
  CHECK_VALUES(C10D_FLOAT32, x, want, 1, "allreduce in the parity group");

  /* a negative color: rank 0 is in no group */
  CHECK_OK(c10d_group_split(g, rank == 0 ? -1 : 0, rank, NULL, &without0),
           "c10d_group_split with a negative color on rank 0");
  if (rank == 0) {
    CHECK(c10d_group_is_member(without0) == 0, "a negative color makes no member");
  } else {
    CHECK(c10d_group_is_member(without0) == 1, "a nonnegative color makes a member");
    CHECK(c10d_group_rank(without0) == rank - 1 && c10d_group_size(without0) == size - 1,
          "the group without rank 0");
    x[0] = (float)rank;
    want[0] = (double)size * (size - 1) / 2;
    CHECK_OK(c10d_allreduce(without0, &b, NULL, NULL), "allreduce in the group without rank 0");
    CHECK_VALUES(C10D_FLOAT32, x, want, 1, "allreduce in the group without rank 0");
  }

  CHECK_OK(c10d_group_shutdown(even), "shutdown of the even group");
  CHECK_OK(c10d_group_shutdown(parity), "shutdown of the parity group");
  CHECK_OK(c10d_group_shutdown(without0), "shutdown of the group without rank 0");
  c10d_group_free(even);
  c10d_group_free(parity);
  c10d_group_free(without0);
}

/* new_subgroups, new_subgroups_by_enumeration, the default group and a device mesh. */
static void test_subgroup_lists_and_mesh(c10d_group* g, int rank, int size) {
  c10d_group *single = NULL, *listed = NULL, *fallback = NULL, *dp = NULL, *pp = NULL;
  c10d_device_mesh* mesh = NULL;
  int lists[MAX_RANKS], shape[2] = {1, 0}, coordinate[2] = {-1, -1}, q;
  size_t sizes[2], dim = 9;
  const char* names[2] = {"pp", "dp"};
  float x[1];
  double want[1];
  c10d_buffer b = cpu(x, 1, C10D_FLOAT32);

  CHECK_OK(c10d_group_new_subgroups(g, 1, NULL, &single), "new_subgroups of 1");
  CHECK(c10d_group_size(single) == 1 && c10d_group_rank(single) == 0, "a subgroup of one");
  CHECK_FAILS(c10d_group_new_subgroups(g, size + 1, NULL, &fallback), C10D_ERR_INVALID_ARGUMENT,
              "divide", "new_subgroups of a size that does not divide the group's");
  /* [0] and [1, size): rank 0 alone, the others together */
  lists[0] = 0;
  for (q = 1; q < size; ++q) lists[q] = q;
  sizes[0] = 1;
  sizes[1] = (size_t)(size - 1);
  CHECK_OK(c10d_group_new_subgroups_by_enumeration(g, lists, sizes, 2, NULL, &listed),
           "new_subgroups_by_enumeration");
  CHECK(listed != NULL && c10d_group_size(listed) == (rank == 0 ? 1 : size - 1),
        "this rank's enumerated subgroup");
  CHECK_OK(c10d_group_default(&fallback), "the default group");
  CHECK(c10d_group_size(fallback) == size && c10d_group_rank(fallback) == rank,
        "the default group is the world c10d_group_init made");

  shape[1] = size;
  CHECK_OK(c10d_device_mesh_init(g, shape, names, 2, &mesh), "a 1 x size mesh");
  CHECK_OK(c10d_device_mesh_coordinate(mesh, coordinate), "this rank's coordinate");
  CHECK(coordinate[0] == 0 && coordinate[1] == rank, "the coordinate is (0, rank)");
  CHECK_OK(c10d_device_mesh_dim(mesh, "dp", &dim), "the dimension named dp");
  CHECK(dim == 1, "dp is dimension 1");
  CHECK_FAILS(c10d_device_mesh_dim(mesh, "tp", &dim), C10D_ERR_INVALID_ARGUMENT, "'dp'",
              "an unknown dimension name lists the mesh's");
  CHECK_OK(c10d_device_mesh_group(mesh, 1, &dp), "the dp group");
  CHECK_OK(c10d_device_mesh_group(mesh, 0, &pp), "the pp group");
  CHECK(c10d_group_size(dp) == size && c10d_group_size(pp) == 1, "the groups' sizes");
  x[0] = (float)(rank + 1);
  want[0] = (double)size * (size + 1) / 2;
  CHECK_OK(c10d_allreduce(dp, &b, NULL, NULL), "allreduce over dp");
  CHECK_VALUES(C10D_FLOAT32, x, want, 1, "allreduce over the mesh's dp dimension");
  shape[1] = size + 1;
  CHECK_FAILS(c10d_device_mesh_init(g, shape, names, 2, &mesh), C10D_ERR_INVALID_ARGUMENT, "shape",
              "a mesh that does not cover the group");

  c10d_group_free(single);
  c10d_group_free(listed);
  c10d_group_free(fallback);
  c10d_group_free(dp);
  c10d_group_free(pp);
  c10d_device_mesh_free(mesh);
}

/* ---- errors ---- */

/* Object collectives over bytes: rank r's text is "r" repeated r + 1 times (rank 0's empty in the
 * gather), every result checked, and src with the wrong count fails on every rank. */
static void object_text(int rank, char* out) {
  int i;
  for (i = 0; i <= rank; ++i) out[i] = (char)('a' + rank % 26);
  out[rank + 1] = '\0';
}

static void test_object_bytes(c10d_group* g, int rank, int size) {
  char mine[MAX_RANKS + 2], want[MAX_RANKS + 2];
  c10d_bytes* list = NULL;
  c10d_bytes one = {NULL, 0};
  c10d_bytes pieces[MAX_RANKS];
  int r;
  object_text(rank, mine);
  CHECK_OK(c10d_all_gather_bytes(g, mine, strlen(mine), &list), "c10d_all_gather_bytes");
  for (r = 0; r < size && list != NULL; ++r) {
    object_text(r, want);
    CHECK_BYTES(list[r], want, "all_gather_bytes: rank r's bytes");
  }
  c10d_free(list);

  CHECK_OK(c10d_broadcast_bytes(g, rank == size - 1 ? "from the last" : NULL,
                                rank == size - 1 ? 13 : 0, size - 1, &one),
           "c10d_broadcast_bytes");
  CHECK_BYTES(one, "from the last", "broadcast_bytes: src's bytes on every rank");

  list = NULL;
  CHECK_OK(c10d_gather_bytes(g, mine, rank == 0 ? 0 : strlen(mine), 1, &list), "c10d_gather_bytes");
  CHECK((list != NULL) == (rank == 1), "gather_bytes: a list on dst only");
  for (r = 0; r < size && list != NULL; ++r) {
    object_text(r, want);
    CHECK_BYTES(list[r], r == 0 ? "" : want, "gather_bytes: rank r's bytes on dst");
  }
  c10d_free(list);

  for (r = 0; r < size; ++r) {
    pieces[r].data = (void*)(r % 2 == 0 ? "even" : "odd");
    pieces[r].size = r % 2 == 0 ? 4 : 3;
  }
  CHECK_OK(c10d_scatter_bytes(g, rank == 0 ? pieces : NULL, rank == 0 ? (size_t)size : 0, 0, &one),
           "c10d_scatter_bytes");
  CHECK_BYTES(one, rank % 2 == 0 ? "even" : "odd", "scatter_bytes: this rank's piece");
  CHECK_FAILS(c10d_scatter_bytes(g, rank == 0 ? pieces : NULL, rank == 0 ? 1 : 0, 0, &one),
              C10D_ERR_INVALID_ARGUMENT, "(src) passed", "scatter_bytes with one piece for all");

  if (rank == 0) {
    CHECK_OK(c10d_send_bytes(g, "hello", 5, 1, 3), "c10d_send_bytes");
  } else if (rank == 1) {
    CHECK_OK(c10d_recv_bytes(g, 0, 3, &one), "c10d_recv_bytes");
    CHECK_BYTES(one, "hello", "recv_bytes: what rank 0 sent");
  }
  barrier(g, "after the object collectives");
}

static void test_argument_errors(c10d_group* g, int rank, int size) {
  float x[COUNT] = {1, 2, 3, 4};
  double want[COUNT];
  char number[16];
  char root_needles[32];
  c10d_buffer b = cpu(x, COUNT, C10D_FLOAT32);
  c10d_buffer bad = b;
  c10d_op_options options = rooted(size);
  c10d_tcp_store_options tcp = C10D_TCP_STORE_OPTIONS_INIT;
  c10d_store* store = NULL;
  int i;

  snprintf(number, sizeof number, "%d", size);
  snprintf(root_needles, sizeof root_needles, "root|%d", size);
  CHECK_FAILS(c10d_allreduce(g, NULL, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, "null|buffer",
              "allreduce with a NULL buffer");
  bad.data = NULL;
  CHECK_FAILS(c10d_allreduce(g, &bad, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, "null|data",
              "allreduce of a buffer with NULL data");
  CHECK_FAILS(c10d_broadcast(g, &b, &options, NULL), C10D_ERR_INVALID_ARGUMENT, root_needles,
              "broadcast with root = size");
  CHECK_FAILS(c10d_send(g, &b, rank, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, "itself|self",
              "send to this rank");
  CHECK_FAILS(c10d_send(g, &b, size, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, number,
              "send to rank size");
  options = tagged(-1);
  CHECK_FAILS(c10d_send(g, &b, (rank + 1) % size, &options, NULL), C10D_ERR_INVALID_ARGUMENT, "tag",
              "send with a negative tag");
  options = reduce_with(C10D_SUM);
  options.struct_size = 3;
  CHECK_FAILS(c10d_allreduce(g, &b, &options, NULL), C10D_ERR_INVALID_ARGUMENT, "struct_size",
              "allreduce with options.struct_size 3");
  tcp.struct_size = 3;
  CHECK_FAILS(c10d_store_tcp(&tcp, &store), C10D_ERR_INVALID_ARGUMENT, "struct_size",
              "c10d_store_tcp with options.struct_size 3");
  bad = b;
  bad.stream = (void*)&bad;
  CHECK_FAILS(c10d_allreduce(g, &bad, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, "stream",
              "allreduce of a CPU buffer with a stream");
  bad = b;
  bad.count = -1;
  CHECK_FAILS(c10d_allreduce(g, &bad, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, "count|negative|-1",
              "allreduce of a buffer with count -1");
  bad = b;
  bad.dtype = (c10d_dtype)42;
  CHECK_FAILS(c10d_allreduce(g, &bad, NULL, NULL), C10D_ERR_INVALID_ARGUMENT, "dtype|type|42",
              "allreduce of a buffer with dtype 42");

  /* None of that reached the group: it still works. */
  for (i = 0; i < COUNT; ++i) want[i] = (double)size * (i + 1);
  CHECK_OK(c10d_allreduce(g, &b, NULL, NULL), "allreduce after the refused calls");
  CHECK_VALUES(C10D_FLOAT32, x, want, COUNT, "allreduce after the refused calls");
}

/* A recv nobody answers times out, and a timeout breaks a Gloo group: each rank times out in a
 * group of its own (lonely[r], every rank a member, used by rank r alone). */
static void test_recv_timeout(c10d_group* g, int rank, int size) {
  c10d_group* lonely[MAX_RANKS];
  float x[COUNT] = {0, 0, 0, 0};
  c10d_buffer b = cpu(x, COUNT, C10D_FLOAT32);
  c10d_op_options options = tagged(999);
  int all[MAX_RANKS];
  int q;

  memset(lonely, 0, sizeof lonely);
  for (q = 0; q < size; ++q) all[q] = q;
  for (q = 0; q < size; ++q) {
    CHECK_OK(c10d_group_new(g, all, (size_t)size, NULL, &lonely[q]), "c10d_group_new of all");
  }
  options.timeout_ms = 200;
  CHECK_FAILS(c10d_recv(lonely[rank], &b, (rank + 1) % size, &options, NULL), C10D_ERR_TIMEOUT,
              "timed out|999", "recv tag 999 with a 200 ms timeout from a rank that never sends");
  barrier(g, "barrier after the recv timeouts");
  for (q = 0; q < size; ++q) {
    CHECK_OK(c10d_group_shutdown(lonely[q]), "shutdown of a group with a timed-out recv");
    c10d_group_free(lonely[q]);
  }
}

/* Shutdown fails what is in flight (rank 0's recv) and every later op. */
static void test_shutdown(c10d_group* g, int rank, int size) {
  c10d_group* doomed = NULL;
  float x[COUNT] = {0, 0, 0, 0};
  c10d_buffer b = cpu(x, COUNT, C10D_FLOAT32);
  c10d_op_options options = tagged(998);
  callback_record record = {0, C10D_ERR_INTERNAL, ""};
  c10d_work* work = NULL;
  c10d_status status;
  int all[MAX_RANKS];
  int q;

  for (q = 0; q < size; ++q) all[q] = q;
  CHECK_OK(c10d_group_new(g, all, (size_t)size, NULL, &doomed), "c10d_group_new to shut down");
  if (rank == 0) {
    /* Only rank 0 has an op in flight, and it shuts down before the others (barrier below). */
    CHECK_OK(c10d_recv(doomed, &b, 1, &options, &work), "async recv tag 998 nobody sends");
    CHECK_OK(c10d_work_on_completion(work, record_completion, &record),
             "c10d_work_on_completion on a recv to be aborted");
    CHECK_OK(c10d_group_shutdown(doomed), "shutdown with a recv in flight");
    CHECK_FAILS(c10d_work_wait(work, 10000), C10D_ERR_STATE, NULL,
                "wait for a recv its group's shutdown aborted");
    c10d_work_free(work);
    CHECK(calls_after_waiting(&record) == 1, "the aborted recv's callback ran");
    CHECK(record.status == C10D_ERR_STATE, "the aborted recv's callback got C10D_ERR_STATE");
    CHECK(record.message[0] != '\0', "the aborted recv's callback got a message");
  }
  barrier(g, "barrier before the other ranks shut down");
  CHECK_OK(c10d_group_shutdown(doomed), "c10d_group_shutdown (again on rank 0: idempotent)");
  status = c10d_allreduce(doomed, &b, NULL, NULL);
  CHECK(status == C10D_ERR_STATE || status == C10D_ERR_INVALID_ARGUMENT,
        "allreduce after shutdown fails with C10D_ERR_STATE or C10D_ERR_INVALID_ARGUMENT");
  CHECK(c10d_last_error()[0] != '\0', "allreduce after shutdown leaves a message");
  c10d_group_free(doomed);
}

/* ---- DLPack ---- */

static void test_dlpack(void) {
  float x[5] = {1, 2, 3, 4, 5};
  int64_t y[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
  c10d_buffer b = cpu(x, 5, C10D_FLOAT32);
  c10d_buffer back;
  DLManagedTensor* tensor = NULL;
  DLManagedTensor own;
  const DLTensor* t;

  CHECK_OK(c10d_buffer_to_dlpack(&b, &tensor), "c10d_buffer_to_dlpack");
  CHECK(tensor != NULL, "c10d_buffer_to_dlpack returns a tensor");
  t = &tensor->dl_tensor;
  CHECK(t->ndim == 1 && t->shape != NULL && t->shape[0] == 5, "to_dlpack: 1-D of count elements");
  CHECK(t->strides == NULL || t->strides[0] == 1, "to_dlpack: contiguous");
  CHECK(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1,
        "to_dlpack: float32 is kDLFloat, 32 bits, 1 lane");
  CHECK(t->device.device_type == kDLCPU && t->device.device_id == 0, "to_dlpack: on the CPU");
  CHECK((char*)t->data + t->byte_offset == (char*)x, "to_dlpack: the buffer's memory, no copy");

  memset(&back, 0, sizeof back);
  CHECK_OK(c10d_buffer_from_dlpack(tensor, &back), "c10d_buffer_from_dlpack of to_dlpack's");
  CHECK(back.data == (void*)x && back.count == 5 && back.dtype == C10D_FLOAT32,
        "from_dlpack(to_dlpack(b)) is b's memory, count and dtype");
  CHECK(back.device_type == C10D_DEVICE_CPU && back.stream == NULL, "from_dlpack: on the CPU");
  CHECK(tensor->deleter != NULL, "to_dlpack's tensor has a deleter");
  tensor->deleter(tensor);

  /* A caller's 2-D contiguous int64 tensor is a buffer of all its elements. */
  memset(&own, 0, sizeof own);
  own.dl_tensor.data = y;
  own.dl_tensor.device.device_type = kDLCPU;
  own.dl_tensor.device.device_id = 0;
  own.dl_tensor.ndim = 2;
  own.dl_tensor.dtype.code = kDLInt;
  own.dl_tensor.dtype.bits = 64;
  own.dl_tensor.dtype.lanes = 1;
  own.dl_tensor.shape = shape;
  own.dl_tensor.strides = NULL;
  CHECK_OK(c10d_buffer_from_dlpack(&own, &back), "c10d_buffer_from_dlpack of a 2x3 int64");
  CHECK(back.data == (void*)y && back.count == 6 && back.dtype == C10D_INT64,
        "from_dlpack of a 2x3 int64 tensor: 6 int64 at its data");
  own.dl_tensor.strides = strides; /* column-major: not contiguous */
  CHECK_FAILS(c10d_buffer_from_dlpack(&own, &back), C10D_ERR_INVALID_ARGUMENT, "contiguous",
              "from_dlpack of a non-contiguous tensor");
}

int main(void) {
  const char* env_rank = getenv("RANK");
  c10d_group* world = NULL;
  c10d_store* hash = NULL;
  c10d_store* prefixed = NULL;
  c10d_store* tcp = NULL;
  c10d_store* file = NULL;
  int rank = -1, size = 0;

  g_rank = env_rank != NULL ? atoi(env_rank) : -1;
  CHECK(env_rank != NULL, "RANK is set (run under c10drun)");
  test_library();
  world = init_world(&rank, &size);
  test_hash_store(&hash, &prefixed);
  tcp = test_tcp_store(world, rank, size);
  file = test_file_store(world, rank, size);
  test_broadcast_and_allreduce(world, rank, size);
  test_coalesced_and_reduce(world, rank, size);
  test_gathers(world, rank, size);
  test_reduce_scatter(world, rank, size);
  test_alltoall(world, rank, size);
  test_async(world, rank, size);
  test_p2p(world, rank, size);
  test_subgroups(world, rank, size);
  test_subgroup_lists_and_mesh(world, rank, size);
  test_object_bytes(world, rank, size);
  test_argument_errors(world, rank, size);
  test_recv_timeout(world, rank, size);
  test_shutdown(world, rank, size);
  test_dlpack();

  /* Nobody uses a store or the group past this barrier. */
  barrier(world, "final barrier");
  CHECK_OK(c10d_group_shutdown(world), "shutdown of the default group");
  c10d_group_free(world);
  c10d_store_free(prefixed);
  c10d_store_free(hash);
  c10d_store_free(tcp);
  c10d_store_free(file);
  printf("capi_test: rank %d of %d: %d checks passed\n", rank, size, g_checks);
  return 0;
}
