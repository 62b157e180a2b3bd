// The C API's error path: C++ exceptions become a status and a thread-local message.

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "c10d/capi/Handles.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::capi {
namespace {

thread_local std::string lastError;

}  // namespace

c10d_status statusWithoutRecording(const std::exception_ptr& error, std::string* message) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgument& e) {
    *message = e.what();
    return C10D_ERR_INVALID_ARGUMENT;
  } catch (const TimeoutError& e) {
    *message = e.what();
    return C10D_ERR_TIMEOUT;
  } catch (const StoreError& e) {
    *message = e.what();
    return C10D_ERR_STORE;
  } catch (const BackendError& e) {
    *message = e.what();
    return C10D_ERR_BACKEND;
  } catch (const RemoteError& e) {
    *message = e.what();
    return C10D_ERR_REMOTE;
  } catch (const StateError& e) {
    *message = e.what();
    return C10D_ERR_STATE;
  } catch (const CheckpointError& e) {
    *message = e.what();
    return C10D_ERR_CHECKPOINT;
  } catch (const std::bad_alloc&) {
    *message = "out of memory";
    return C10D_ERR_INTERNAL;
  } catch (const std::exception& e) {
    *message = e.what();
    return C10D_ERR_INTERNAL;
  } catch (...) {
    *message = "an exception that is not a std::exception";
    return C10D_ERR_INTERNAL;
  }
}

c10d_status statusOf(const std::exception_ptr& error) noexcept {
  std::string message;
  c10d_status status = statusWithoutRecording(error, &message);
  try {
    lastError = std::move(message);
  } catch (...) {
  }
  return status;
}

c10d_status statusOfCurrentException() noexcept {
  return statusOf(std::current_exception());
}

c10d_bytes copyOut(const void* data, size_t size) {
  // malloc, not new: c10d_free is free(), so a binding may also release it with its own free.
  void* copy = std::malloc(size == 0 ? 1 : size);
  if (copy == nullptr) throw std::bad_alloc();
  if (size > 0) std::memcpy(copy, data, size);
  return c10d_bytes{copy, size};
}

}  // namespace c10d::capi

extern "C" {

int c10d_api_version(void) {
  return C10D_API_VERSION;
}

const char* c10d_last_error(void) {
  return c10d::capi::lastError.c_str();
}

const char* c10d_status_name(c10d_status status) {
  switch (status) {
    case C10D_OK:
      return "C10D_OK";
    case C10D_ERR_INVALID_ARGUMENT:
      return "C10D_ERR_INVALID_ARGUMENT";
    case C10D_ERR_TIMEOUT:
      return "C10D_ERR_TIMEOUT";
    case C10D_ERR_STORE:
      return "C10D_ERR_STORE";
    case C10D_ERR_BACKEND:
      return "C10D_ERR_BACKEND";
    case C10D_ERR_REMOTE:
      return "C10D_ERR_REMOTE";
    case C10D_ERR_STATE:
      return "C10D_ERR_STATE";
    case C10D_ERR_INTERNAL:
      return "C10D_ERR_INTERNAL";
    case C10D_ERR_CHECKPOINT:
      return "C10D_ERR_CHECKPOINT";
  }
  return "unknown status";
}

void c10d_free(void* data) {
  std::free(data);
}

}  // extern "C"
