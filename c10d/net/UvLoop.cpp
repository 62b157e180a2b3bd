#include "c10d/net/UvLoop.hpp"

#include <string_view>

#include "c10d/core/Logging.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v1::detail {

namespace {

// uv_walk's callback (owner: the std::string naming the loop's owner). A handle closed here gets
// no close callback: memory it stands for leaks rather than being freed twice.
void closeIfOpen(uv_handle_t* handle, void* owner) {
  if (uv_is_closing(handle)) return;
  C10D_LOG(Debug, *static_cast<const std::string*>(owner), ": closing a ",
           uv_handle_type_name(uv_handle_get_type(handle)), " handle left open at stop");
  uv_close(handle, nullptr);
}

}  // namespace

std::string uvError(int rc) {
  // The _r forms: uv_err_name() allocates, and never frees, the name of a code it does not know.
  char name[64];
  char text[128];
  uv_err_name_r(rc, name, sizeof(name));
  uv_strerror_r(rc, text, sizeof(text));
  // Both say "Unknown system error <rc>" for such a code: once is enough.
  if (std::string_view(name) == text) return name;
  return std::string(name) + " (" + text + ")";
}

std::string UvLoopThread::init() {
  int rc = uv_loop_init(&loop_);
  if (rc != 0) return "uv_loop_init failed: " + uvError(rc);
  rc = uv_async_init(&loop_, &wakeup_, [](uv_async_t* async) {
    static_cast<UvLoopThread*>(async->data)->runCommands();
  });
  if (rc != 0) {
    // It failed before registering the handle, so the loop has none and closes.
    uv_loop_close(&loop_);
    return "uv_async_init failed: " + uvError(rc);
  }
  wakeup_.data = this;
  return "";
}

UvLoopThread::~UvLoopThread() {
  stop();
}

void UvLoopThread::start() {
  std::lock_guard<std::mutex> guard(stopMutex_);
  C10D_CHECK(!thread_.joinable() && !stopped_, StateError, owner_,
             ": its loop thread was started already, or stopped");
  thread_ = std::thread([this] {
    loopThreadId_.store(std::this_thread::get_id());
    nameThisThread(threadName_);
    blockSigpipeInThisThread();
    run();
    // Before the id can be another thread's: a thread made later may get it, and its stop() must
    // not be taken for the loop thread's.
    loopThreadId_.store(std::thread::id());
  });
  // Also here, so that it is set when start() returns. The thread cannot have cleared it yet: it
  // ends only after stop(), which waits for stopMutex_.
  loopThreadId_.store(thread_.get_id());
}

void UvLoopThread::post(std::function<void()> command) {
  std::lock_guard<std::mutex> guard(mutex_);
  C10D_CHECK(!closed_, StateError, owner_, " is closed");
  // A queue that is not empty has a wakeup on its way: the loop has not taken the queue yet.
  bool wake = commands_.empty();
  commands_.push_back(std::move(command));
  if (wake) uv_async_send(&wakeup_);
}

void UvLoopThread::runCommands() noexcept {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    batch.swap(commands_);
  }
  for (auto& command : batch) command();
}

void UvLoopThread::stop(std::function<void()> closeEverything) {
  C10D_CHECK(std::this_thread::get_id() != loopThreadId_.load(), InvalidArgument, owner_,
             " was stopped from its own loop thread, which cannot wait for itself");
  std::lock_guard<std::mutex> stopping(stopMutex_);
  if (stopped_) return;
  stopped_ = true;
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    closed_ = true;
    // The last command: post() refuses any after it, so the commands already queued run first.
    bool wake = commands_.empty();
    commands_.push_back(
        [this, &closeEverything, &failure] { closeEverythingLeft(closeEverything, failure); });
    if (wake) uv_async_send(&wakeup_);
  }
  if (thread_.joinable()) {
    thread_.join();
  } else {
    run();  // never started: the loop's last turn runs here, where its handles were made
  }
  if (failure) std::rethrow_exception(failure);
}

void UvLoopThread::closeEverythingLeft(const std::function<void()>& closeEverything,
                                       std::exception_ptr& failure) {
  try {
    if (closeEverything) closeEverything();
  } catch (...) {
    // Stopping half-way would leave the loop running and stop() joining it forever: close the
    // rest, and let stop() rethrow once the thread has ended.
    failure = std::current_exception();
  }
  if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&wakeup_))) {
    uv_close(reinterpret_cast<uv_handle_t*>(&wakeup_), nullptr);
  }
  uv_walk(&loop_, closeIfOpen, &owner_);
}

void UvLoopThread::run() {
  // Returns once no handle is active or closing, which the wakeup prevents until stop().
  uv_run(&loop_, UV_RUN_DEFAULT);
  // A handle made by a close callback after stop()'s walk, active or not, keeps the loop from
  // closing (uv_loop_close fails while any handle is open): close those as well.
  while (uv_loop_close(&loop_) == UV_EBUSY) {
    uv_walk(&loop_, closeIfOpen, &owner_);
    uv_run(&loop_, UV_RUN_DEFAULT);
  }
}

}  // namespace c10d::inline v1::detail
