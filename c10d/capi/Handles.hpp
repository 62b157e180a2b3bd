#pragma once

// What the C API's opaque handles are, and the one place C++ errors become C statuses. Private to
// libc10d_c: nothing here is installed.

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/capi/c10d.h"
#include "c10d/checkpoint/State.hpp"
#include "c10d/core/Tensor.hpp"
#include "store/Store.hpp"

struct c10d_store {
  std::shared_ptr<c10d::Store> store;
  uint16_t port = 0;  // a TCP store's port, 0 for others
};

struct c10d_group {
  std::shared_ptr<c10d::ProcessGroup> group;
};

struct c10d_checkpoint_state {
  c10d::checkpoint::State state;
  // The CUDA streams the buffers were given with: a save, load or heal first waits for the
  // work queued on them, so that it reads (or writes) what that work leaves.
  std::vector<std::pair<c10d::Device, void*>> streams;
};

struct c10d_work {
  std::shared_ptr<c10d::Work> work;
  // Keeps the group alive while its work is: the C caller may free the group first.
  std::shared_ptr<c10d::ProcessGroup> group;
  // The CUDA stream of the op's buffers: a wait orders that stream after the op (NCCL's
  // Work::wait orders the calling thread's current stream).
  bool onStream = false;
  void* stream = nullptr;
};

namespace c10d::capi {

// Records the exception being handled as this thread's last error and returns its status.
c10d_status statusOfCurrentException() noexcept;
// The status for an error a Work or Future holds (also records it as the last error).
c10d_status statusOf(const std::exception_ptr& error) noexcept;
// The status an error maps to, without recording anything (for callbacks on library threads).
c10d_status statusWithoutRecording(const std::exception_ptr& error, std::string* message) noexcept;

// Runs body, turning whatever it throws into a status and this thread's last error: every
// exported function's body goes through here, so no exception crosses the C boundary.
template <typename Body>
c10d_status guarded(Body&& body) noexcept {
  try {
    std::forward<Body>(body)();
    return C10D_OK;
  } catch (...) {
    return statusOfCurrentException();
  }
}

// The handle's object, or InvalidArgument naming the call and the argument.
template <typename Handle>
Handle& deref(Handle* handle, const char* call, const char* what) {
  C10D_CHECK(handle != nullptr, InvalidArgument, call, ": ", what, " is NULL");
  return *handle;
}

// Where a call writes its result, or InvalidArgument when the caller passed NULL for it. Take it
// before making the result: in `outOf(out, call) = new X`, X is made first and leaks on NULL.
template <typename Out>
Out& outOf(Out* out, const char* call) {
  C10D_CHECK(out != nullptr, InvalidArgument, call, ": the pointer for the result is NULL");
  return *out;
}

// Checks an option struct's struct_size field against the size this library was built with.
// Returns false for NULL (use the defaults). Every struct is at its first version, so only its
// size is known; a version that grows one will accept each earlier size too and default the
// fields that size lacks, and refuses sizes it does not know (a newer caller's fields would be
// ignored, a partial field misread).
template <typename Options>
bool checkOptions(const Options* options, const char* call) {
  if (options == nullptr) return false;
  C10D_CHECK(options->struct_size == sizeof(Options), InvalidArgument, call,
             ": options->struct_size is ", options->struct_size, ", this library's is ",
             sizeof(Options),
             options->struct_size > sizeof(Options)
                 ? " (the caller was built against a newer c10d.h: link a "
                   "libc10d_c as new as that header)"
                 : " (start from the *_OPTIONS_INIT macro of c10d.h)");
  return true;
}

// A Tensor over the buffer's memory (no copy), after checking every field.
Tensor tensorOf(const c10d_buffer* buffer, const char* call, const char* what);
std::vector<Tensor> tensorsOf(const c10d_buffer* buffers, size_t count, const char* call,
                              const char* what);

// The descriptor of tensor's memory (no stream): what the library hands back to C.
c10d_buffer bufferOf(const Tensor& tensor);

// Milliseconds from C, where negative means "the default": kDefaultTimeout.
std::chrono::milliseconds timeoutOf(int64_t timeoutMs);

// Waits for the work queued on the CUDA streams state's buffers were added with (Checkpoint.cpp).
void waitForStreams(const c10d_checkpoint_state& state);

// Sets the calling thread's current CUDA stream to the one the op's CUDA buffers name (all must
// name the same), and restores the previous one when it goes: the NCCL backend orders its work
// after the current stream, and Work::wait orders the current stream after the op.
class StreamScope {
 public:
  // The op's buffers: up to two arrays (outputs and inputs), either may be NULL.
  StreamScope(const char* call, const c10d_buffer* first, size_t firstCount,
              const c10d_buffer* second = nullptr, size_t secondCount = 0);
  // A work's stream again, for its wait.
  explicit StreamScope(const c10d_work& work);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

  bool active() const { return set_; }
  void* stream() const { return stream_; }

 private:
  void enter(void* stream);

  bool set_ = false;
  void* stream_ = nullptr;
  void* previous_ = nullptr;
};

// Hands the started work to the caller (out non-NULL) or waits for it (out NULL, inside stream's
// scope), as every operation of c10d.h promises.
void deliver(std::shared_ptr<Work> work, const std::shared_ptr<ProcessGroup>& group,
             const StreamScope& stream, c10d_work** out);

// A handle on store (with its port when it is a TCP store, for c10d_store_port).
c10d_store* storeHandle(std::shared_ptr<Store> store);

// A copy of bytes in memory c10d_free releases.
c10d_bytes copyOut(const void* data, size_t size);

}  // namespace c10d::capi
