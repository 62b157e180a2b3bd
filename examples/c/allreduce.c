/* allreduce from C: every rank contributes 4 floats equal to rank + 1, and after the allreduce
 * each element holds 1 + 2 + ... + size on every rank. Run it with
 * `c10drun --nproc-per-node 4 allreduce_c` (the launcher sets MASTER_ADDR, MASTER_PORT, RANK and
 * WORLD_SIZE; C10D_BACKEND picks the backend, gloo by default). Exits 0 only if the sum is
 * right on this rank. */
#include <stdio.h>

#include "c10d/capi/c10d.h"

static int fail(const char* what) {
  fprintf(stderr, "allreduce: %s: %s\n", what, c10d_last_error());
  return 1;
}

int main(void) {
  c10d_init_options init = C10D_INIT_OPTIONS_INIT; /* env://, backend from C10D_BACKEND */
  c10d_group* group = NULL;
  c10d_work* work = NULL;
  float values[4];
  c10d_buffer buffer = {values, 4, C10D_FLOAT32, C10D_DEVICE_CPU, 0, NULL};
  int rank, size, i;

  if (c10d_group_init(&init, &group) != C10D_OK) return fail("init");
  rank = c10d_group_rank(group);
  size = c10d_group_size(group);

  for (i = 0; i < 4; ++i) values[i] = (float)(rank + 1);
  /* work NULL: the call blocks and returns the operation's status (SUM by default). */
  if (c10d_allreduce(group, &buffer, NULL, NULL) != C10D_OK) return fail("allreduce");
  for (i = 0; i < 4; ++i) {
    if (values[i] != (float)(size * (size + 1) / 2)) {
      fprintf(stderr, "allreduce: rank %d: element %d is %g, expected %d\n", rank, i, values[i],
              size * (size + 1) / 2);
      return 1;
    }
  }

  /* With a work pointer the call returns once started; c10d_work_wait finishes it. */
  if (c10d_barrier(group, NULL, &work) != C10D_OK) return fail("barrier");
  if (c10d_work_wait(work, -1) != C10D_OK) return fail("barrier wait");
  c10d_work_free(work);

  printf("rank %d of %d: allreduce ok\n", rank, size);
  c10d_group_shutdown(group);
  c10d_group_free(group);
  return 0;
}
