#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v0 {

// The timeout that means "the default": in an op's options, the group's timeout (C10D_TIMEOUT or
// the one given at creation); in Work::wait, the op's own.
inline constexpr std::chrono::milliseconds kDefaultTimeout{-1};

// The eventual result of an operation: a list of tensors or an error. Callbacks added with
// then() run exactly once, on the thread that completes the future (or at once, on the caller's
// thread, when it is already complete).
//
// Threading: every method may be called from any thread.
class Future : public std::enable_shared_from_this<Future> {
 public:
  using Callback = std::function<void(Future&)>;

  bool completed() const;
  // Blocks until complete or timeout; returns false on timeout, rethrows the error otherwise.
  bool waitFor(std::chrono::milliseconds timeout);
  // Blocks until complete; rethrows the error. Throws TimeoutError naming what after timeout.
  void wait(std::chrono::milliseconds timeout, const std::string& what = "future");
  void wait();  // no deadline: for futures whose producer has its own timeout
  // The value; rethrows the error. Throws Error when not yet complete.
  const std::vector<Tensor>& value() const;
  std::exception_ptr error() const;
  bool hasError() const { return error() != nullptr; }

  // Runs callback once complete.
  void addCallback(Callback callback);
  // Runs hook as the future completes, before any wait on it returns and before the callbacks:
  // for bookkeeping that whoever waited must find done (the flight recorder's record of the op).
  // It may read error(); it must be quick and must not wait on this future. Added to a future
  // that is complete (or completing), it runs at once.
  void addCompletionHook(Callback hook);
  // A future completed with fn(this)'s result, or with the error fn throws or this holds.
  std::shared_ptr<Future> then(std::function<std::vector<Tensor>(Future&)> fn);

  // Producer side: completes the future once; later calls are ignored and return false.
  bool markCompleted(std::vector<Tensor> value = {});
  bool setError(std::exception_ptr error);

 private:
  bool complete(std::vector<Tensor> value, std::exception_ptr error);
  // Adds callback to the hooks (or the callbacks) until the future is settled (or completed);
  // then runs it at once.
  void addOrRun(bool hook, Callback callback);

  mutable std::mutex mutex_;
  std::condition_variable done_;
  // Written under mutex_, after value_ and error_; read without it, since a completed future
  // never changes: a blocking op's wait, which finds its op done, takes no lock.
  std::atomic<bool> completed_{false};
  // Value or error set (written under mutex_, after them; read without it by error(), which
  // the completion hooks call); completed_ once the hooks ran.
  std::atomic<bool> settled_{false};
  std::vector<Tensor> value_;
  std::exception_ptr error_;
  // The first callback is kept in place: most futures get one (the flight recorder's hook), and
  // a vector for it cost an allocation per op.
  struct Callbacks {
    Callback first;
    std::vector<Callback> more;
    void add(Callback callback) {
      if (!first) {
        first = std::move(callback);
      } else {
        more.push_back(std::move(callback));
      }
    }
  };
  Callbacks callbacks_;
  Callbacks hooks_;
};

// A started operation of a ProcessGroup. It ends in success, in the operation's error, or in a
// TimeoutError once the operation's timeout has passed: never pending forever.
//
// Threading: every method may be called from any thread; wait() may be called by several.
class Work {
 public:
  // Produces the description when one is needed (an error, a log line): formatting it for every
  // op cost more than a small collective's own work.
  using Describe = std::function<std::string()>;

  Work(Describe describe, std::chrono::milliseconds timeout, std::vector<Tensor> outputs);
  Work(std::string description, std::chrono::milliseconds timeout, std::vector<Tensor> outputs);
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  bool isCompleted() const { return future_->completed(); }
  bool isSuccess() const { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const { return future_->error(); }

  // Blocks until the operation completes and rethrows its error. With kDefaultTimeout the
  // operation's own timeout applies; a shorter one throws TimeoutError when it passes (the
  // operation itself goes on and still completes or fails by its own timeout).
  // Virtual for device backends, whose wait may order the caller's stream after the op instead
  // (NCCL).
  virtual void wait(std::chrono::milliseconds timeout = kDefaultTimeout);

  // The source rank of a completed receive (recvAnysource reports who sent). Throws Error for
  // other operations or before completion.
  int sourceRank() const;
  // Whether sourceRank() has a value (a completed receive).
  bool hasSourceRank() const { return isCompleted() && sourceRank_ >= 0; }
  // The tensors the operation wrote (its outputs), once it has succeeded.
  std::vector<Tensor> result() const;
  std::shared_ptr<Future> getFuture() const { return future_; }

  // "allreduce float32[1024] sum (group 'default', seq 12)": for errors and logs.
  std::string description() const { return describe_(); }
  // What description() calls, for a backend that hands it on without formatting it.
  const Describe& describer() const { return describe_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Producer side, used by backends. error must be this Work's alone (not shared with another
  // Work: detail::copyError makes one), because setErrorContext writes into it.
  void finish();
  void finishWithError(std::exception_ptr error);
  void setSourceRank(int rank) { sourceRank_ = rank; }

  // ProcessGroup's side, right after the backend returned the work: the op's error (an Error)
  // gets these in its context(), whether it failed already or fails later. group (the group's
  // name and this rank) and op must outlive the work: an interned context and a string literal.
  // The first call wins (a backend may return one Work for several ops of a batch); calls come
  // from the issuing thread only.
  void setErrorContext(const ErrorContext* group, const char* op, int64_t sequence, int peer);

 protected:
  // Called by wait() before it blocks: a backend may run a queued operation on the waiting
  // thread instead of handing it to its worker (saves a thread hand-off for blocking calls).
  virtual void beforeWait() {}

 private:
  Describe describe_;
  std::chrono::milliseconds timeout_;
  std::vector<Tensor> outputs_;
  std::shared_ptr<Future> future_;
  int sourceRank_ = -1;

  // Filled into the error by whichever of finishWithError and setErrorContext comes second: each
  // sets its bit of contextState_ after writing its part, and the one that finds the other's
  // bit set fills. Lock-free, because every op pays for setErrorContext.
  void fillContext(const std::exception_ptr& error) const;
  static constexpr uint8_t kErrorClaimed = 1;  // the first finishWithError is writing error_
  static constexpr uint8_t kErrorReady = 2;    // error_ is written
  static constexpr uint8_t kContextReady = 4;  // the context fields are written
  std::atomic<uint8_t> contextState_{0};
  std::exception_ptr error_;
  const ErrorContext* contextGroup_ = nullptr;
  const char* contextOp_ = nullptr;
  int64_t contextSequence_ = -1;
  int contextPeer_ = -1;
};

}  // namespace c10d::inline v0
