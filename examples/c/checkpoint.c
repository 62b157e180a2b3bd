/* Checkpoints from C: each rank holds its rows of an 8 x 4 float matrix (element = its index),
 * and all ranks save them, with a step value, into CHECKPOINT_DIR/step-1 (argument 1; a fresh
 * folder). Then each rank loads the matrix back whole (one rank's view of the global tensor,
 * whatever the world size was at save), checks every element and the step, and rank 0 verifies
 * every checksum. Run it with `c10drun --nproc-per-node 2 checkpoint_c DIR`. */
#include <stdio.h>
#include <string.h>

#include "c10d/capi/c10d.h"

#define ROWS 8
#define COLS 4

static int fail(const char* what) {
  fprintf(stderr, "checkpoint: %s: %s\n", what, c10d_last_error());
  return 1;
}

int main(int argc, char** argv) {
  c10d_init_options init = C10D_INIT_OPTIONS_INIT;
  c10d_checkpoint_save_options save = C10D_CHECKPOINT_SAVE_OPTIONS_INIT;
  c10d_group* group = NULL;
  c10d_checkpoint_state* state = NULL;
  float mine[ROWS * COLS], whole[ROWS * COLS];
  const int64_t shape[2] = {ROWS, COLS};
  int64_t offsets[2], sizes[2], step = 7, loaded_step = 0;
  char dir[512];
  c10d_bytes value, report;
  int rank, size, part, first, count, i, found, problems;

  if (argc != 2) {
    fprintf(stderr, "usage: %s CHECKPOINT_DIR\n", argv[0]);
    return 2;
  }
  snprintf(dir, sizeof(dir), "%s/step-1", argv[1]);
  if (c10d_group_init(&init, &group) != C10D_OK) return fail("init");
  rank = c10d_group_rank(group);
  size = c10d_group_size(group);
  part = (ROWS + size - 1) / size;
  first = rank * part < ROWS ? rank * part : ROWS;
  count = first + part < ROWS ? part : ROWS - first;

  for (i = 0; i < count * COLS; ++i) mine[i] = (float)(first * COLS + i);
  {
    c10d_buffer local = {mine, count * COLS, C10D_FLOAT32, C10D_DEVICE_CPU, 0, NULL};
    offsets[0] = first, offsets[1] = 0, sizes[0] = count, sizes[1] = COLS;
    if (c10d_checkpoint_state_new(&state) != C10D_OK) return fail("state");
    if (c10d_checkpoint_state_add(state, "w", &local, shape, 2, C10D_SLICE_BOX, offsets, sizes) !=
        C10D_OK)
      return fail("add");
    if (c10d_checkpoint_state_set_int(state, "step", step) != C10D_OK) return fail("set_int");
    if (c10d_checkpoint_state_set_value(state, "note", "from C", 6) != C10D_OK)
      return fail("set_value");
    save.layout = "data";
    if (c10d_checkpoint_save(state, dir, group, &save) != C10D_OK) return fail("save");
    c10d_checkpoint_state_free(state);
  }

  /* Every rank loads the whole matrix: a load at another slicing than the save's. */
  memset(whole, 0, sizeof(whole));
  {
    c10d_buffer all = {whole, ROWS * COLS, C10D_FLOAT32, C10D_DEVICE_CPU, 0, NULL};
    if (c10d_checkpoint_state_new(&state) != C10D_OK) return fail("state");
    if (c10d_checkpoint_state_add(state, "w", &all, shape, 2, C10D_SLICE_BOX, NULL, NULL) !=
        C10D_OK)
      return fail("add whole");
    if (c10d_checkpoint_load(state, dir, group, NULL) != C10D_OK) return fail("load");
    if (c10d_checkpoint_state_get_int(state, "step", &loaded_step) != C10D_OK)
      return fail("get_int");
    if (c10d_checkpoint_state_get_value(state, "note", &value, &found) != C10D_OK)
      return fail("get_value");
    if (loaded_step != step || !found || value.size != 6 || memcmp(value.data, "from C", 6) != 0) {
      fprintf(stderr, "checkpoint: rank %d: the values did not come back\n", rank);
      return 1;
    }
    c10d_free(value.data);
    c10d_checkpoint_state_free(state);
  }
  for (i = 0; i < ROWS * COLS; ++i) {
    if (whole[i] != (float)i) {
      fprintf(stderr, "checkpoint: rank %d: element %d is %g\n", rank, i, whole[i]);
      return 1;
    }
  }
  if (rank == 0) {
    if (c10d_checkpoint_verify(dir, &report, &problems) != C10D_OK) return fail("verify");
    if (problems != 0) {
      fprintf(stderr, "checkpoint: verify: %s", (const char*)report.data);
      return 1;
    }
    c10d_free(report.data);
  }
  printf("rank %d of %d: checkpoint saved in rows, loaded whole, verified\n", rank, size);
  c10d_group_shutdown(group);
  c10d_group_free(group);
  return 0;
}
