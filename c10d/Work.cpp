#include "c10d/Work.hpp"

#include "c10d/GroupTrace.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Futex.hpp"
#include "c10d/core/Logging.hpp"

namespace c10d::inline v1 {

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

void runCallback(const Future::Callback& callback, Future& future) {
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

template <typename List>
void runAll(List& list, Future& future) {
  if (list.first) runCallback(list.first, future);
  for (const Future::Callback& callback : list.more) runCallback(callback, future);
}

}  // namespace

bool Future::settle(std::vector<Tensor> value, std::exception_ptr error) {
  Callbacks hooks;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (settled_.load(std::memory_order_relaxed)) return false;
    value_ = std::move(value);
    error_ = std::move(error);
    settled_.store(true, std::memory_order_release);
    std::swap(hooks, hooks_);
  }
  runAll(hooks, *this);
  return true;
}

Future::Callbacks Future::publishSettled() {
  Callbacks callbacks;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    completed_.store(true, std::memory_order_release);
    std::swap(callbacks, callbacks_);
  }
  done_.notify_all();
  return callbacks;
}

void Future::runCallbacks(Callbacks& callbacks) {
  runAll(callbacks, *this);
}

bool Future::complete(std::vector<Tensor> value, std::exception_ptr error) {
  if (!settle(std::move(value), std::move(error))) return false;
  Callbacks callbacks = publishSettled();
  runCallbacks(callbacks);
  return true;
}

// ---- Work ----

namespace {

// getFuture() may race itself on one Work: a stripe of locks, taken only there.
std::mutex& futureLock(const void* work) {
  static std::mutex stripes[64];
  return stripes[(reinterpret_cast<uintptr_t>(work) >> 6) % 64];
}

}  // namespace

Work::Work(std::string description, std::chrono::milliseconds timeout, std::vector<Tensor> outputs)
    : outputs_(std::move(outputs)), description_(std::move(description)), timeout_(timeout) {}

Work::Work(const Op& op, std::shared_ptr<detail::GroupTrace> trace)
    : op_(op), trace_(std::move(trace)), timeout_(op.timeout), state_(kBound) {
  if (trace_ && trace_->timesOps()) started_ = std::chrono::steady_clock::now();
}

Work::~Work() = default;

void Work::rebind(const Op& op) {
  op_ = op;
  timeout_ = op.timeout;
  sourceRank_ = -1;
  if (trace_ && trace_->timesOps()) started_ = std::chrono::steady_clock::now();
  // Nobody else holds a pooled Work while it is rebound.
  state_.store(kBound, std::memory_order_relaxed);
}

void Work::recycle() {
  output_.reset();
  if (!outputs_.empty()) outputs_.clear();
  if (error_) error_ = nullptr;
  if (future_) future_.reset();
}

bool Work::isCompleted() const {
  if (state_.load(std::memory_order_acquire) & kDone) return true;
  startAsync();
  return false;
}

bool Work::isSuccess() const {
  return isCompleted() && !error_;
}

std::exception_ptr Work::exception() const {
  // error_ never changes once settled.
  return state_.load(std::memory_order_acquire) & kSettled ? error_ : nullptr;
}

void Work::wait(std::chrono::milliseconds timeout) {
  if (!(state_.load(std::memory_order_acquire) & kDone)) {
    // Running the op here blocks for as long as the op takes: only when the caller is willing to
    // wait that long. A shorter wait leaves the op to the backend's own threads.
    const bool whole = timeout == kDefaultTimeout || timeout >= timeout_;
    if (whole) {
      beforeWait();
    } else {
      startAsync();
    }
    // The backend enforces the op's timeout and fails the work with its own, better message;
    // the margin here only guards against a backend that fails to. A wait given its own
    // timeout ends by it.
    const auto limit = timeout == kDefaultTimeout ? timeout_ + std::chrono::seconds(10) : timeout;
    if (!(state_.load(std::memory_order_acquire) & kDone) &&
        !waitDone(std::chrono::steady_clock::now() + limit)) {
      C10D_THROW(TimeoutError, description(), ": not complete after ", limit.count(), " ms");
    }
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::waitDone(std::chrono::steady_clock::time_point until) const {
  for (;;) {
    uint32_t state = state_.load(std::memory_order_acquire);
    if (state & kDone) return true;
    if (!(state & kSleeping)) {
      if (!state_.compare_exchange_weak(state, state | kSleeping, std::memory_order_acq_rel)) {
        continue;
      }
      state |= kSleeping;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return false;
    detail::futexWait(state_, state, until - now);
  }
}

int Work::sourceRank() const {
  C10D_CHECK(isCompleted(), Error, description(), ": sourceRank() before completion");
  C10D_CHECK(sourceRank_ >= 0, Error, description(), ": sourceRank() is only defined for receives");
  return sourceRank_;
}

std::vector<Tensor> Work::result() const {
  C10D_CHECK(isCompleted(), Error, description(), ": result() before completion");
  if (error_) std::rethrow_exception(error_);
  return futureValue();
}

std::vector<Tensor> Work::futureValue() const {
  if (error_) return {};
  if (!outputs_.empty() || !output_.defined()) return outputs_;
  return {output_};
}

std::string Work::description() const {
  if (!description_.empty() || !(state_.load(std::memory_order_acquire) & kBound)) {
    return description_;
  }
  return trace_ ? describeNumbered(op_, &trace_->group()) : describeNumbered(op_);
}

std::shared_ptr<Future> Work::getFuture() const {
  if (!(state_.load(std::memory_order_acquire) & kFuture)) {
    std::lock_guard<std::mutex> guard(futureLock(this));
    if (!(state_.load(std::memory_order_acquire) & kFuture)) {
      future_ = std::make_shared<Future>();
      // Whoever sets its bit second completes the future: here when the op settled first.
      const uint32_t before = state_.fetch_or(kFuture, std::memory_order_acq_rel);
      if (before & kSettled) {
        future_->complete(futureValue(), error_);
      } else {
        startAsync();
      }
    }
  }
  return future_;
}

void Work::finish() {
  complete(nullptr);
}

void Work::finishWithError(std::exception_ptr error) {
  complete(std::move(error));
}

bool Work::complete(std::exception_ptr error) {
  uint32_t state = state_.fetch_or(kClaimed, std::memory_order_acq_rel);
  if (state & kClaimed) return false;  // only the first outcome is the op's
  error_ = std::move(error);
  settle(state | kClaimed);
  return true;
}

void Work::completeAlone(std::exception_ptr error) {
  error_ = std::move(error);
  settle(state_.load(std::memory_order_acquire));
}

void Work::settle(uint32_t state) {
  // Whoever comes second of this and bind() fills in the op's context and records it.
  bool told = false;
  for (;;) {
    if ((state & kBound) && !told) {
      if (error_) fillContext(error_);
      if (trace_) trace_->finished(op_, error_, started_);
      told = true;
    }
    // Without a Future, waiters may return at once; with one, its hooks run first.
    const uint32_t next = state | kClaimed | kSettled | ((state & kFuture) ? 0 : kDone);
    if (state_.compare_exchange_weak(state, next, std::memory_order_acq_rel)) break;
  }
  if (!(state & kFuture)) {
    if (state & kSleeping) detail::futexWake(state_);
    return;
  }
  // The Future completes (hooks, then marked complete) before the Work's waiters return, so
  // that whoever waited on the Work finds its Future complete; its callbacks run after.
  future_->settle(futureValue(), error_);
  // Once kDone is set, a waiter may drop the last hold on this Work, which a pool then recycles
  // (future_ reset): the callbacks run on the Future held here.
  std::shared_ptr<Future> future = future_;
  Future::Callbacks callbacks = future->publishSettled();
  state = state_.fetch_or(kDone, std::memory_order_acq_rel);
  if (state & kSleeping) detail::futexWake(state_);
  future->runCallbacks(callbacks);
}

void Work::bindUnbound(const Op& op, const std::shared_ptr<detail::GroupTrace>& trace) {
  op_ = op;
  trace_ = trace;
  const uint32_t before = state_.fetch_or(kBound, std::memory_order_acq_rel);
  if (before & kSettled) {
    if (error_) fillContext(error_);
    if (trace_) trace_->finished(op_, error_, started_);
  }
}

void Work::fillContext(const std::exception_ptr& error) const {
  if (!trace_) return;
  try {
    std::rethrow_exception(error);
  } catch (Error& e) {
    e.addContext(trace_->context(op_));
  } catch (...) {
    // Not ours (a program's backend's std::exception): it has no context to fill.
  }
}

}  // namespace c10d::inline v1
