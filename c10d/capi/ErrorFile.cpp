// The launcher's error file, for C programs and bindings that fail on their own terms.

#include "c10d/ErrorFile.hpp"
#include "c10d/capi/Handles.hpp"

using namespace c10d;
using namespace c10d::capi;

extern "C" {

c10d_status c10d_write_error_file(const char* message, int* written) {
  return guarded([&] {
    C10D_CHECK(message != nullptr, InvalidArgument, "c10d_write_error_file: message is NULL");
    bool wrote = writeErrorFile(message);
    if (written != nullptr) *written = wrote ? 1 : 0;
  });
}

}  // extern "C"
