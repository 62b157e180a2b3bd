/* capi_rpc_test: the C API's RPC from C99, one process per worker under c10drun (2 or more).
 * Worker r calls worker (r + 1) % size: bytes and tensors both ways, async and sync calls, a
 * function's failure, an unknown function and worker, timeouts of the call and of the wait. */
#define _POSIX_C_SOURCE 200809L

#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c10d/capi/c10d.h"

#define CHECK_TEST_NAME "capi_rpc_test"
#include "check.h"

/* A 1-D float32 tensor in memory of its own, freed by its deleter. */
typedef struct owned_tensor {
  DLManagedTensor managed;
  int64_t shape[1];
  float data[1]; /* count elements follow */
} owned_tensor;

static void free_owned(DLManagedTensor* self) {
  free(self->manager_ctx);
}

static DLManagedTensor* new_tensor(int64_t count) {
  owned_tensor* t = malloc(sizeof(owned_tensor) + sizeof(float) * (size_t)count);
  if (t == NULL) return NULL;
  memset(&t->managed, 0, sizeof t->managed);
  t->shape[0] = count;
  t->managed.dl_tensor.data = t->data;
  t->managed.dl_tensor.device.device_type = kDLCPU;
  t->managed.dl_tensor.ndim = 1;
  t->managed.dl_tensor.dtype.code = kDLFloat;
  t->managed.dl_tensor.dtype.bits = 32;
  t->managed.dl_tensor.dtype.lanes = 1;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.manager_ctx = t;
  t->managed.deleter = free_owned;
  return &t->managed;
}

/* echo: the request's bytes back, prefixed with the callee's name, and its tensors. */
static c10d_status echo(void* user, const c10d_rpc_message* request, c10d_rpc_message* reply) {
  const void* data;
  size_t size, i;
  char text[256];
  c10d_status status = c10d_rpc_message_bytes(request, &data, &size);
  if (status != C10D_OK) return status;
  snprintf(text, sizeof text, "%s:%.*s", (const char*)user, (int)size, (const char*)data);
  status = c10d_rpc_message_set_bytes(reply, text, strlen(text));
  for (i = 0; status == C10D_OK && i < c10d_rpc_message_num_tensors(request); ++i) {
    DLManagedTensor* tensor;
    status = c10d_rpc_message_tensor(request, i, &tensor);
    if (status == C10D_OK) status = c10d_rpc_message_add_tensor(reply, tensor);
  }
  return status;
}

/* sum: one float32 tensor of the sum of the request's float32 tensors. */
static c10d_status sum(void* user, const c10d_rpc_message* request, c10d_rpc_message* reply) {
  size_t i, n = c10d_rpc_message_num_tensors(request);
  DLManagedTensor* out = new_tensor(1);
  (void)user;
  ((float*)out->dl_tensor.data)[0] = 0;
  for (i = 0; i < n; ++i) {
    DLManagedTensor* t;
    int64_t j;
    if (c10d_rpc_message_tensor(request, i, &t) != C10D_OK) return C10D_ERR_INTERNAL;
    for (j = 0; j < t->dl_tensor.shape[0]; ++j) {
      ((float*)out->dl_tensor.data)[0] += ((const float*)t->dl_tensor.data)[j];
    }
    t->deleter(t);
  }
  return c10d_rpc_message_add_tensor(reply, out);
}

static c10d_status refuse(void* user, const c10d_rpc_message* request, c10d_rpc_message* reply) {
  (void)user;
  (void)request;
  c10d_rpc_message_set_error(reply, "refused on purpose");
  return C10D_ERR_INVALID_ARGUMENT;
}

static c10d_status slow(void* user, const c10d_rpc_message* request, c10d_rpc_message* reply) {
  struct timespec pause = {0, 600 * 1000 * 1000};
  (void)user;
  (void)request;
  (void)reply;
  nanosleep(&pause, NULL);
  return C10D_OK;
}

/* Async functions (they reply later): relay forwards its request to this worker's peer's echo
 * and answers with echo's reply when that call ends, holding none of the agent's threads. */
static c10d_rpc* g_agent;
static char g_peer[32];

typedef struct relay_call {
  c10d_rpc_future* future;
  c10d_rpc_responder* responder;
} relay_call;

static void relay_done(void* user) {
  relay_call* call = (relay_call*)user;
  c10d_rpc_message* result = NULL;
  if (c10d_rpc_future_wait(call->future, -1, &result) == C10D_OK) {
    c10d_rpc_respond(call->responder, C10D_OK, result);
    c10d_rpc_message_free(result);
  } else {
    c10d_rpc_message* failure = NULL;
    c10d_rpc_message_new(&failure);
    c10d_rpc_message_set_error(failure, c10d_last_error());
    c10d_rpc_respond(call->responder, C10D_ERR_REMOTE, failure);
    c10d_rpc_message_free(failure);
  }
  c10d_rpc_future_free(call->future);
  free(call);
}

static c10d_status relay(void* user, const c10d_rpc_message* request,
                         c10d_rpc_responder* responder) {
  relay_call* call = (relay_call*)malloc(sizeof *call);
  (void)user;
  call->responder = responder;
  if (c10d_rpc_call(g_agent, g_peer, "echo", request, -1, &call->future) != C10D_OK) {
    free(call);
    return C10D_ERR_REMOTE;
  }
  return c10d_rpc_future_on_done(call->future, relay_done, call);
}

static c10d_status refuse_later(void* user, const c10d_rpc_message* request,
                                c10d_rpc_responder* responder) {
  c10d_rpc_message* failure = NULL;
  (void)user;
  (void)request;
  c10d_rpc_message_new(&failure);
  c10d_rpc_message_set_error(failure, "refused later on purpose");
  c10d_rpc_respond(responder, C10D_ERR_INVALID_ARGUMENT, failure);
  c10d_rpc_message_free(failure);
  return C10D_OK;
}

static c10d_status fail_at_once(void* user, const c10d_rpc_message* request,
                                c10d_rpc_responder* responder) {
  (void)user;
  (void)request;
  (void)responder;
  return C10D_ERR_BACKEND;
}

int main(void) {
  c10d_init_options init = C10D_INIT_OPTIONS_INIT;
  c10d_rpc_options options = C10D_RPC_OPTIONS_INIT;
  c10d_store* store = NULL;
  c10d_group* group = NULL;
  c10d_rpc* agent = NULL;
  c10d_rpc_message *args, *result = NULL;
  c10d_rpc_future* future = NULL;
  char name[32], peer[32], expected[64];
  const void* data;
  size_t size;
  int size_world, id, done;
  DLManagedTensor* tensor;
  c10d_rpc_function_entry functions[4];

  CHECK(c10d_group_init(&init, &group) == C10D_OK, "group init");
  g_rank = c10d_group_rank(group);
  size_world = c10d_group_size(group);
  CHECK(c10d_group_store(group, &store) == C10D_OK, "the group's store");
  {
    uint16_t port = 0;
    const char* master = getenv("MASTER_PORT");
    CHECK(c10d_store_port(store, &port) == C10D_OK && master != NULL && port == atoi(master),
          "the group's store is the TCP store at MASTER_PORT");
  }
  snprintf(name, sizeof name, "worker%d", g_rank);
  snprintf(peer, sizeof peer, "worker%d", (g_rank + 1) % size_world);
  functions[0].name = "echo";
  functions[0].function = echo;
  functions[0].user = name;
  functions[1].name = "sum";
  functions[1].function = sum;
  functions[1].user = NULL;
  functions[2].name = "refuse";
  functions[2].function = refuse;
  functions[2].user = NULL;
  functions[3].name = "slow";
  functions[3].function = slow;
  functions[3].user = NULL;
  options.timeout_ms = 20000;
  {
    static c10d_rpc_async_function_entry later[2];
    later[0].name = "relay";
    later[0].function = relay;
    later[0].user = NULL;
    later[1].name = "refuse_later";
    later[1].function = refuse_later;
    later[1].user = NULL;
    options.async_functions = later;
    options.num_async_functions = 2;
  }
  CHECK(c10d_rpc_init(store, name, g_rank, size_world, functions, 4, &options, &agent) == C10D_OK,
        "rpc init");
  CHECK(c10d_rpc_worker_id(agent, peer, &id) == C10D_OK && id == (g_rank + 1) % size_world,
        "worker id of the peer");
  g_agent = agent;
  snprintf(g_peer, sizeof g_peer, "%s", peer);
  CHECK(c10d_rpc_register_async(agent, "fail_at_once", fail_at_once, NULL) == C10D_OK,
        "register fail_at_once");
  CHECK(c10d_rpc_register_async(agent, "nothing", NULL, NULL) == C10D_ERR_INVALID_ARGUMENT,
        "a NULL async function is refused");
  /* Every worker's async functions exist before anyone calls them. */
  CHECK(c10d_barrier(group, NULL, NULL) == C10D_OK, "barrier after registering");
  {
    const char* found = NULL;
    int count = 0;
    CHECK(c10d_rpc_worker_count(agent, &count) == C10D_OK && count == size_world, "worker count");
    CHECK(c10d_rpc_worker_name(agent, (g_rank + 1) % size_world, &found) == C10D_OK &&
              strcmp(found, peer) == 0,
          "the peer's name from its id");
    CHECK(c10d_rpc_worker_name(agent, size_world, &found) == C10D_ERR_INVALID_ARGUMENT,
          "an id out of range");
  }
  CHECK(c10d_rpc_worker_id(agent, "nobody", &id) == C10D_ERR_INVALID_ARGUMENT &&
            strstr(c10d_last_error(), "nobody") != NULL,
        "an unknown worker is refused by name");

  /* Bytes and a tensor there and back, asynchronously. */
  CHECK(c10d_rpc_message_new(&args) == C10D_OK, "message");
  CHECK(c10d_rpc_message_set_bytes(args, "hello", 5) == C10D_OK, "set bytes");
  tensor = new_tensor(3);
  ((float*)tensor->dl_tensor.data)[0] = 1.0f;
  ((float*)tensor->dl_tensor.data)[1] = 2.0f;
  ((float*)tensor->dl_tensor.data)[2] = (float)g_rank;
  CHECK(c10d_rpc_message_add_tensor(args, tensor) == C10D_OK, "add tensor");
  CHECK(c10d_rpc_call(agent, peer, "echo", args, -1, &future) == C10D_OK, "call echo");
  CHECK(c10d_rpc_future_wait(future, -1, &result) == C10D_OK, "echo's result");
  c10d_rpc_future_free(future);
  CHECK(c10d_rpc_message_bytes(result, &data, &size) == C10D_OK, "reply bytes");
  snprintf(expected, sizeof expected, "%s:hello", peer);
  CHECK(size == strlen(expected) && memcmp(data, expected, size) == 0, "echo's bytes");
  CHECK(c10d_rpc_message_num_tensors(result) == 1, "echo's tensor count");
  CHECK(c10d_rpc_message_tensor(result, 0, &tensor) == C10D_OK, "echo's tensor");
  CHECK(tensor->dl_tensor.shape[0] == 3 && ((float*)tensor->dl_tensor.data)[2] == (float)g_rank,
        "echo's tensor values");
  tensor->deleter(tensor);
  c10d_rpc_message_free(result);

  /* sync: the callee computes a new tensor. */
  CHECK(c10d_rpc_call_sync(agent, peer, "sum", args, -1, &result) == C10D_OK, "call sum");
  CHECK(c10d_rpc_message_tensor(result, 0, &tensor) == C10D_OK, "sum's tensor");
  CHECK(((float*)tensor->dl_tensor.data)[0] == 3.0f + (float)g_rank, "sum's value");
  tensor->deleter(tensor);
  c10d_rpc_message_free(result);
  c10d_rpc_message_free(args);

  /* Failures reach the caller with the function's name and text. */
  CHECK(c10d_rpc_call_sync(agent, peer, "refuse", NULL, -1, NULL) == C10D_ERR_REMOTE &&
            strstr(c10d_last_error(), "refuse") != NULL &&
            strstr(c10d_last_error(), "refused on purpose") != NULL,
        "a function's failure");
  CHECK(c10d_rpc_call_sync(agent, peer, "missing", NULL, -1, NULL) == C10D_ERR_REMOTE &&
            strstr(c10d_last_error(), "missing") != NULL,
        "an unknown function");
  CHECK(c10d_rpc_call_sync(agent, peer, "slow", NULL, 100, NULL) == C10D_ERR_TIMEOUT,
        "a call past its timeout");
  /* A wait shorter than the call leaves it running. */
  CHECK(c10d_rpc_call(agent, peer, "slow", NULL, -1, &future) == C10D_OK, "call slow");
  CHECK(c10d_rpc_future_wait(future, 50, NULL) == C10D_ERR_TIMEOUT, "a short wait");
  CHECK(c10d_rpc_future_test(future, &done) == C10D_OK && done == 0, "still running");
  CHECK(c10d_rpc_future_wait(future, -1, NULL) == C10D_OK, "the call ends well");
  c10d_rpc_future_free(future);

  /* relay on the peer calls the peer's peer's echo, and answers when that ends. */
  CHECK(c10d_rpc_message_new(&args) == C10D_OK, "relay message");
  CHECK(c10d_rpc_message_set_bytes(args, "via", 3) == C10D_OK, "relay bytes");
  CHECK(c10d_rpc_call_sync(agent, peer, "relay", args, -1, &result) == C10D_OK, "call relay");
  CHECK(c10d_rpc_message_bytes(result, &data, &size) == C10D_OK, "relay's reply bytes");
  snprintf(expected, sizeof expected, "worker%d:via", (g_rank + 2) % size_world);
  CHECK(size == strlen(expected) && memcmp(data, expected, size) == 0,
        "relay answers with echo's reply from two workers on");
  c10d_rpc_message_free(result);
  c10d_rpc_message_free(args);
  CHECK(c10d_rpc_call_sync(agent, peer, "refuse_later", NULL, -1, NULL) == C10D_ERR_REMOTE &&
            strstr(c10d_last_error(), "refuse_later") != NULL &&
            strstr(c10d_last_error(), "refused later on purpose") != NULL,
        "an async function's later failure");
  CHECK(c10d_rpc_call_sync(agent, peer, "fail_at_once", NULL, -1, NULL) == C10D_ERR_REMOTE &&
            strstr(c10d_last_error(), "without responding") != NULL,
        "an async function that fails without responding");
  /* Every worker's relays are answered before anyone shuts down. */
  CHECK(c10d_barrier(group, NULL, NULL) == C10D_OK, "barrier before shutdown");

  CHECK(c10d_rpc_shutdown(agent, 1) == C10D_OK, "graceful shutdown");
  CHECK(c10d_rpc_call_sync(agent, peer, "echo", NULL, -1, NULL) == C10D_ERR_STATE,
        "a call after shutdown");
  c10d_rpc_free(agent);
  c10d_store_free(store);
  c10d_group_shutdown(group);
  c10d_group_free(group);
  printf("capi_rpc_test: rank %d: %d checks passed\n", g_rank, g_checks);
  return 0;
}
