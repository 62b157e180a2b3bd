#include "c10d/Work.hpp"

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"

namespace c10d::inline v0 {

bool Future::completed() const {
  return completed_.load(std::memory_order_acquire);
}

bool Future::waitFor(std::chrono::milliseconds timeout) {
  // Done already (a blocking op that ran on the waiting thread): no lock and no clock.
  if (!completed_.load(std::memory_order_acquire)) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!done_.wait_for(lock, timeout, [&] { return completed_.load(std::memory_order_relaxed); }))
      return false;
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

void Future::wait(std::chrono::milliseconds timeout, const std::string& what) {
  if (!waitFor(timeout)) {
    C10D_THROW(TimeoutError, what, ": not complete after ", timeout.count(), " ms");
  }
}

void Future::wait() {
  if (!completed_.load(std::memory_order_acquire)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed); });
  }
  if (error_) std::rethrow_exception(error_);
}

const std::vector<Tensor>& Future::value() const {
  C10D_CHECK(completed_.load(std::memory_order_acquire), Error,
             "Future::value() called before the future completed");
  if (error_) std::rethrow_exception(error_);
  return value_;
}

std::exception_ptr Future::error() const {
  if (settled_.load(std::memory_order_acquire)) return error_;  // never changes once set
  std::lock_guard<std::mutex> guard(mutex_);
  return error_;
}

void Future::addOrRun(bool hook, Callback callback) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!(hook ? settled_ : completed_).load(std::memory_order_relaxed)) {
      (hook ? hooks_ : callbacks_).add(std::move(callback));
      return;
    }
  }
  callback(*this);
}

void Future::addCallback(Callback callback) {
  addOrRun(false, std::move(callback));
}

void Future::addCompletionHook(Callback hook) {
  addOrRun(true, std::move(hook));
}

std::shared_ptr<Future> Future::then(std::function<std::vector<Tensor>(Future&)> fn) {
  auto child = std::make_shared<Future>();
  addCallback([child, fn = std::move(fn)](Future& parent) {
    if (parent.hasError()) {
      child->setError(parent.error());
      return;
    }
    try {
      child->markCompleted(fn(parent));
    } catch (...) {
      child->setError(std::current_exception());
    }
  });
  return child;
}

bool Future::markCompleted(std::vector<Tensor> value) {
  return complete(std::move(value), nullptr);
}

bool Future::setError(std::exception_ptr error) {
  return complete({}, std::move(error));
}

namespace {

void runCallback(Future::Callback& callback, Future& future) {
  try {
    callback(future);
  } catch (const std::exception& e) {
    // A callback's failure cannot fail a future that already completed: report it, and run
    // the remaining callbacks.
    C10D_LOG(Error, "Future callback threw: ", e.what());
  } catch (...) {
    C10D_LOG(Error, "Future callback threw an exception that is not a std::exception");
  }
}

}  // namespace

bool Future::complete(std::vector<Tensor> value, std::exception_ptr error) {
  auto runAll = [this](Callbacks& list) {
    if (list.first) runCallback(list.first, *this);
    for (Callback& callback : list.more) runCallback(callback, *this);
  };
  Callbacks hooks;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (settled_.load(std::memory_order_relaxed)) return false;
    value_ = std::move(value);
    error_ = std::move(error);
    settled_.store(true, std::memory_order_release);
    std::swap(hooks, hooks_);
  }
  runAll(hooks);
  Callbacks callbacks;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    completed_.store(true, std::memory_order_release);
    std::swap(callbacks, callbacks_);
  }
  done_.notify_all();
  runAll(callbacks);
  return true;
}

Work::Work(Describe describe, std::chrono::milliseconds timeout, std::vector<Tensor> outputs)
    : describe_(std::move(describe)),
      timeout_(timeout),
      outputs_(std::move(outputs)),
      future_(std::make_shared<Future>()) {}

Work::Work(std::string description, std::chrono::milliseconds timeout, std::vector<Tensor> outputs)
    : Work([text = std::move(description)] { return text; }, timeout, std::move(outputs)) {}

void Work::wait(std::chrono::milliseconds timeout) {
  // Running the op here blocks for as long as the op takes: only when the caller is willing to
  // wait that long. A shorter wait leaves the op to the backend's own threads.
  if (!future_->completed() && (timeout == kDefaultTimeout || timeout >= timeout_)) beforeWait();
  // The backend enforces the op's timeout and fails the work with its own, better message;
  // the margin here only guards against a backend that fails to.
  auto limit = timeout == kDefaultTimeout ? timeout_ + std::chrono::seconds(10) : timeout;
  if (!future_->waitFor(limit)) {
    C10D_THROW(TimeoutError, description(), ": not complete after ", limit.count(), " ms");
  }
}

int Work::sourceRank() const {
  C10D_CHECK(isCompleted(), Error, description(), ": sourceRank() before completion");
  C10D_CHECK(sourceRank_ >= 0, Error, description(), ": sourceRank() is only defined for receives");
  return sourceRank_;
}

std::vector<Tensor> Work::result() const {
  C10D_CHECK(isCompleted(), Error, description(), ": result() before completion");
  return future_->value();  // rethrows the op's error
}

void Work::finish() {
  // Moved, not copied: result() reads them from the future.
  future_->markCompleted(std::move(outputs_));
}

void Work::finishWithError(std::exception_ptr error) {
  // Only the first error is the op's (the future ignores later ones too).
  if ((contextState_.fetch_or(kErrorClaimed, std::memory_order_acq_rel) & kErrorClaimed) == 0) {
    error_ = error;
    if (contextState_.fetch_or(kErrorReady, std::memory_order_acq_rel) & kContextReady) {
      fillContext(error);
    }
  }
  future_->setError(std::move(error));
}

void Work::setErrorContext(const ErrorContext* group, const char* op, int64_t sequence, int peer) {
  if (contextState_.load(std::memory_order_acquire) & kContextReady) return;
  contextGroup_ = group;
  contextOp_ = op;
  contextSequence_ = sequence;
  contextPeer_ = peer;
  if (contextState_.fetch_or(kContextReady, std::memory_order_acq_rel) & kErrorReady) {
    fillContext(error_);
  }
}

void Work::fillContext(const std::exception_ptr& error) const {
  ErrorContext context = *contextGroup_;
  context.op = contextOp_ != nullptr ? contextOp_ : "";
  context.sequence = contextSequence_;
  if (contextPeer_ >= 0) context.peers = {contextPeer_};
  try {
    std::rethrow_exception(error);
  } catch (Error& e) {
    e.addContext(context);
  } catch (...) {
    // Not ours (a user backend's std::exception): it has no context to fill.
  }
}

}  // namespace c10d::inline v0
