/* Compiles c10d.h alone as strict C99 (see tests/integration/CMakeLists.txt): the header must need
 * nothing a C compiler lacks, and its *_INIT macros must initialise their structs completely. */
#include "c10d/capi/c10d.h"

int c10d_header_strict_check(void);

int c10d_header_strict_check(void) {
  c10d_tcp_store_options tcp = C10D_TCP_STORE_OPTIONS_INIT;
  c10d_init_options init = C10D_INIT_OPTIONS_INIT;
  c10d_group_options group = C10D_GROUP_OPTIONS_INIT;
  c10d_op_options op = C10D_OP_OPTIONS_INIT;
  return (int)(tcp.struct_size + init.struct_size + group.struct_size + op.struct_size);
}
