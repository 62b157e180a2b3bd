/* capi_ddp_test: the C API's data-parallel reducer from C99, one process per rank (2 or more).
 * Gradients are rank-dependent, so the averages are known exactly: after a backward, gradient
 * element j of parameter p holds the mean over ranks of (rank + 1) * (p + 1) + j. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c10d/capi/c10d.h"

#define CHECK_TEST_NAME "capi_ddp_test"
#include "check.h"

#define PARAMS 3
#define COUNT 5

static float values[PARAMS][COUNT];
static float grads[PARAMS][COUNT];

static c10d_buffer buffer_of(float* data) {
  c10d_buffer b = {NULL, COUNT, C10D_FLOAT32, C10D_DEVICE_CPU, 0, NULL};
  b.data = data;
  return b;
}

/* The gradients one backward on this rank produces, scaled by times (accumulated backwards). */
static void produce(float* const* targets, int rank, int times) {
  int p, j;
  for (p = 0; p < PARAMS; ++p) {
    for (j = 0; j < COUNT; ++j) targets[p][j] = (float)(times * ((rank + 1) * (p + 1) + j));
  }
}

static void expect_average(float* const* targets, int size, int times, const char* what) {
  int p, j;
  for (p = 0; p < PARAMS; ++p) {
    for (j = 0; j < COUNT; ++j) {
      /* mean over r of times * ((r + 1) * (p + 1) + j) */
      float want = (float)times * ((float)(p + 1) * (float)(size + 1) / 2.0f + (float)j);
      CHECK(targets[p][j] == want, what);
    }
  }
}

static void backward(c10d_ddp* ddp) {
  int p;
  for (p = PARAMS - 1; p >= 0; --p) { /* the last layers' gradients come first */
    CHECK(c10d_ddp_mark_grad_ready(ddp, (size_t)p) == C10D_OK, "mark ready");
  }
}

int main(void) {
  c10d_init_options init = C10D_INIT_OPTIONS_INIT;
  c10d_ddp_options options = C10D_DDP_OPTIONS_INIT;
  c10d_ddp_parameter parameters[PARAMS];
  c10d_group* group = NULL;
  c10d_ddp *ddp = NULL, *views = NULL;
  float* targets[PARAMS];
  int size, p, j, synced;

  CHECK(c10d_group_init(&init, &group) == C10D_OK, "group init");
  g_rank = c10d_group_rank(group);
  size = c10d_group_size(group);
  for (p = 0; p < PARAMS; ++p) {
    for (j = 0; j < COUNT; ++j) values[p][j] = (float)(g_rank * 100 + p);
    parameters[p].value = buffer_of(values[p]);
    parameters[p].grad = buffer_of(grads[p]);
    parameters[p].name = NULL;
    targets[p] = grads[p];
  }
  options.first_bucket_bytes = COUNT * sizeof(float); /* several buckets */
  options.bucket_cap_bytes = 2 * COUNT * sizeof(float);
  CHECK(c10d_ddp_create(group, parameters, PARAMS, &options, &ddp) == C10D_OK, "create");

  /* sync_parameters: everyone gets rank 0's values. */
  CHECK(c10d_ddp_sync_parameters(ddp, NULL, 0, 0) == C10D_OK, "sync parameters");
  for (p = 0; p < PARAMS; ++p) CHECK(values[p][0] == (float)p, "parameters from rank 0");

  /* Two synchronised backwards. */
  for (j = 0; j < 2; ++j) {
    produce(targets, g_rank, 1);
    backward(ddp);
    CHECK(c10d_ddp_finalize_backward(ddp, &synced) == C10D_OK && synced == 1, "finalize");
    expect_average(targets, size, 1, "averaged gradients");
  }

  /* No-sync: two local backwards accumulate, the next one reduces the sum. */
  CHECK(c10d_ddp_set_no_sync(ddp, 1) == C10D_OK, "no-sync on");
  produce(targets, g_rank, 1);
  backward(ddp);
  CHECK(c10d_ddp_finalize_backward(ddp, &synced) == C10D_OK && synced == 0, "a no-sync backward");
  CHECK(c10d_ddp_set_no_sync(ddp, 0) == C10D_OK, "no-sync off");
  produce(targets, g_rank, 2); /* the framework accumulated a second backward */
  backward(ddp);
  CHECK(c10d_ddp_finalize_backward(ddp, &synced) == C10D_OK && synced == 1, "the synced one");
  expect_average(targets, size, 2, "the accumulated gradients' average");

  /* A gradient not marked on any rank: every rank gets an error naming it. */
  CHECK(c10d_ddp_mark_grad_ready(ddp, 0) == C10D_OK && c10d_ddp_mark_grad_ready(ddp, 1) == C10D_OK,
        "marks");
  CHECK(c10d_ddp_finalize_backward(ddp, NULL) == C10D_ERR_INVALID_ARGUMENT &&
            strstr(c10d_last_error(), "parameters[2]") != NULL,
        "a missing gradient is named");
  CHECK(c10d_ddp_mark_grad_ready(ddp, PARAMS) == C10D_ERR_INVALID_ARGUMENT, "index out of range");
  c10d_ddp_free(ddp);

  /* The reducer's own gradient memory. */
  options.gradient_as_bucket_view = 1;
  for (p = 0; p < PARAMS; ++p) parameters[p].grad.data = NULL;
  CHECK(c10d_ddp_create(group, parameters, PARAMS, &options, &views) == C10D_OK, "create (views)");
  for (j = 0; j < 2; ++j) { /* the first backward may move the views: fetch them each time */
    for (p = 0; p < PARAMS; ++p) {
      c10d_buffer g;
      CHECK(c10d_ddp_gradient(views, (size_t)p, &g) == C10D_OK && g.count == COUNT, "gradient");
      targets[p] = g.data;
    }
    produce(targets, g_rank, 1);
    backward(views);
    CHECK(c10d_ddp_finalize_backward(views, NULL) == C10D_OK, "finalize (views)");
    for (p = 0; p < PARAMS; ++p) {
      c10d_buffer g;
      CHECK(c10d_ddp_gradient(views, (size_t)p, &g) == C10D_OK, "gradient after");
      targets[p] = g.data;
    }
    expect_average(targets, size, 1, "averages in the reducer's memory");
  }
  c10d_ddp_free(views);

  c10d_group_shutdown(group);
  c10d_group_free(group);
  printf("capi_ddp_test: rank %d: %d checks passed\n", g_rank, g_checks);
  return 0;
}
