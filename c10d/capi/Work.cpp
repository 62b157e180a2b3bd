// The C API's work handles: wait, test, the source of a receive, completion callbacks.

#include "c10d/capi/Handles.hpp"

using namespace c10d;
using namespace c10d::capi;

extern "C" {

c10d_status c10d_work_wait(c10d_work* work, int64_t timeout_ms) {
  return guarded([&] {
    c10d_work& w = deref(work, "c10d_work_wait", "work");
    StreamScope stream(w);
    w.work->wait(timeoutOf(timeout_ms));
  });
}

c10d_status c10d_work_is_completed(c10d_work* work, int* completed) {
  c10d_status status = guarded([&] {
    Work& w = *deref(work, "c10d_work_is_completed", "work").work;
    C10D_CHECK(completed != nullptr, InvalidArgument, "c10d_work_is_completed: completed is NULL");
    *completed = w.isCompleted() ? 1 : 0;
  });
  if (status != C10D_OK || *completed == 0) return status;
  std::exception_ptr error = work->work->exception();
  return error ? statusOf(error) : C10D_OK;
}

c10d_status c10d_work_source_rank(c10d_work* work, int* rank) {
  return guarded([&] {
    Work& w = *deref(work, "c10d_work_source_rank", "work").work;
    C10D_CHECK(rank != nullptr, InvalidArgument, "c10d_work_source_rank: rank is NULL");
    *rank = w.sourceRank();
  });
}

c10d_status c10d_work_on_completion(c10d_work* work, c10d_work_callback callback, void* user) {
  return guarded([&] {
    Work& w = *deref(work, "c10d_work_on_completion", "work").work;
    C10D_CHECK(callback != nullptr, InvalidArgument, "c10d_work_on_completion: callback is NULL");
    w.getFuture()->addCallback([callback, user](Future& future) {
      std::string message;
      std::exception_ptr error = future.error();
      c10d_status status = error ? statusWithoutRecording(error, &message) : C10D_OK;
      callback(user, status, message.c_str());
    });
  });
}

void c10d_work_free(c10d_work* work) {
  delete work;
}

// The former names (deprecated in the header, exported for programs built against them).
c10d_status c10d_work_test(c10d_work* work, int* completed) {
  return c10d_work_is_completed(work, completed);
}

}  // extern "C"
