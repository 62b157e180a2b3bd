/* The C tests' failure report: CHECK(cond, what) counts a check and, when cond is false, prints
 * "<test>: rank R: <what> (line L): <c10d_last_error()>" and exits 1. Each test defines
 * CHECK_TEST_NAME before including this, and sets g_rank once it knows it. */
#ifndef C10D_TESTS_CAPI_CHECK_H
#define C10D_TESTS_CAPI_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "c10d/capi/c10d.h"

static int g_rank = -1;
static int g_checks = 0;

#define CHECK(cond, what)                                                                         \
  do {                                                                                            \
    ++g_checks;                                                                                   \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "%s: rank %d: %s (line %d): %s\n", CHECK_TEST_NAME, g_rank, what, __LINE__, \
              c10d_last_error());                                                                 \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

#endif
