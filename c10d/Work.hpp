#pragma once

/// \file
/// Work, the handle of a started operation; Future, its eventual result; BackendWork, the Work
/// of a backend a program writes; and kDefaultTimeout.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "c10d/Op.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

/// The timeout that means "the default": in an op's options, the group's timeout (C10D_TIMEOUT or
/// the one given at creation); in Work::wait, the op's own.
inline constexpr std::chrono::milliseconds kDefaultTimeout{-1};

/// The eventual result of an operation: a list of tensors or an error. Callbacks added with
/// then() run exactly once, on the thread that completes the future (or at once, on the caller's
/// thread, when it is already complete).
///
/// Threading: every method may be called from any thread.
class Future : public std::enable_shared_from_this<Future> {
 public:
  /// A callback or completion hook; it gets this future. What it throws on the completing thread
  /// is logged and ignored; run at once (added to a complete future), it reaches the adder.
  using Callback = std::function<void(Future&)>;

  /// \return Whether the future is complete (its value or error set; waiters return).
  bool completed() const;
  /// Blocks until complete or timeout; returns false on timeout, rethrows the error otherwise.
  /// \param timeout how long to wait at most.
  /// \return True once complete with a value, false when timeout passed first.
  bool waitFor(std::chrono::milliseconds timeout);
  /// Blocks until complete; rethrows the error. Throws TimeoutError naming what after timeout.
  /// \param timeout how long to wait at most.
  /// \param what names the future in the TimeoutError ("what: not complete after N ms").
  /// \throws TimeoutError when timeout passes first.
  void wait(std::chrono::milliseconds timeout, const std::string& what = "future");
  void wait();  ///< no deadline: for futures whose producer has its own timeout
  /// The value; rethrows the error. Throws Error when not yet complete.
  /// \return The tensors the future completed with.
  /// \throws Error when the future is not complete yet.
  const std::vector<Tensor>& value() const;
  /// \return The error the future completed with; null on success or before its outcome is set.
  std::exception_ptr error() const;
  /// \return Whether the future holds an error (error() is not null).
  bool hasError() const { return error() != nullptr; }

  /// Runs callback once complete.
  /// \param callback runs once, on the thread that completes the future, or at once on this
  ///     thread when the future is complete already.
  void addCallback(Callback callback);
  /// Runs hook as the future completes, before any wait on it returns and before the callbacks:
  /// for bookkeeping that whoever waited must find done (the flight recorder's record of the op).
  /// It may read error(); it must be quick and must not wait on this future. Added to a future
  /// that is complete (or completing), it runs at once.
  /// \param hook runs once, on the completing thread (or at once on this one).
  void addCompletionHook(Callback hook);
  /// A future completed with fn(this)'s result, or with the error fn throws or this holds.
  /// \param fn called with this future once it completed without error (a callback of it).
  /// \return The new future.
  std::shared_ptr<Future> then(std::function<std::vector<Tensor>(Future&)> fn);

  /// Producer side: completes the future once; later calls are ignored and return false.
  /// \param value the result.
  /// \return True when this call completed the future.
  bool markCompleted(std::vector<Tensor> value = {});
  /// Producer side: completes the future with error, once; later calls are ignored and return
  /// false.
  /// \param error the error that value(), wait() and waitFor() rethrow.
  /// \return True when this call completed the future.
  bool setError(std::exception_ptr error);

 private:
  friend class Work;
  bool complete(std::vector<Tensor> value, std::exception_ptr error);
  /// complete()'s three steps, for a Work that publishes its own completion between them: settle
  /// sets the outcome and runs the hooks (false if it was set already); publishSettled marks the
  /// future complete (waiters return) and hands back the callbacks, which runCallbacks then runs.
  bool settle(std::vector<Tensor> value, std::exception_ptr error);
  struct Callbacks;
  Callbacks publishSettled();
  void runCallbacks(Callbacks& callbacks);
  /// Adds callback to the hooks (or the callbacks) until the future is settled (or completed);
  /// then runs it at once.
  void addOrRun(bool hook, Callback callback);

  mutable std::mutex mutex_;
  std::condition_variable done_;
  /// Written under mutex_, after value_ and error_; read without it, since a completed future
  /// never changes: a blocking op's wait, which finds its op done, takes no lock.
  std::atomic<bool> completed_{false};
  /// Value or error set (written under mutex_, after them; read without it by error(), which
  /// the completion hooks call); completed_ once the hooks ran.
  std::atomic<bool> settled_{false};
  std::vector<Tensor> value_;
  std::exception_ptr error_;
  /// The first callback is kept in place: most futures get one, and a vector for it cost an
  /// allocation per op.
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

namespace detail {
class GroupTrace;
template <typename T>
class WorkPool;
}  // namespace detail

/// A started operation of a ProcessGroup. It ends in success, in the operation's error, or in a
/// TimeoutError once the operation's timeout has passed: never pending forever.
///
/// A blocking call (an op, then wait()) is the path this class is built for: the Work of one of
/// this library's backends knows its op (op()) and formats its description only when asked, its
/// completion is one atomic word that a waiter sleeps on (a futex) only when the op is not done
/// yet, and its Future exists only once getFuture() asks for it; no lock is taken and nothing is
/// allocated for it (backends reuse their Works: c10d/WorkPool.hpp).
///
/// Threading: every method may be called from any thread; wait() may be called by several.
class Work {
 public:
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Whether the op has ended. Polling a Work that is not done tells the backend that its caller
  /// is not waiting for it, which starts its op at once (see wait()).
  /// \return Whether the op has ended (in success or error).
  bool isCompleted() const;
  /// \return Whether the op has ended without error (polls as isCompleted() does).
  bool isSuccess() const;
  /// \return The op's error; null until the op's outcome is set, and after success.
  std::exception_ptr exception() const;

  /// Blocks until the operation completes and rethrows its error. With kDefaultTimeout the
  /// operation's own timeout applies; a shorter one throws TimeoutError when it passes (the
  /// operation itself goes on and still completes or fails by its own timeout).
  /// An op of this library's CPU backends that is next in line runs on the waiting thread (no
  /// hand-off); one that nobody waits for starts on the backend's thread once its Future is asked
  /// for, it is polled, its group's next op is issued behind it, the backend's thread ran the op
  /// before it (a caller that issues ahead), or the backend's thread finds it still unclaimed at
  /// two of its looks (1 to 16 ms apart while ops flow).
  /// Virtual for device backends, whose wait may order the caller's stream after the op instead
  /// (NCCL).
  /// \param timeout how long to wait at most; kDefaultTimeout: the op's own timeout (with a
  ///     10 s margin, against a backend that fails to end the op by it).
  /// \throws TimeoutError when timeout passes before the op completes; the op's error when it
  ///     failed.
  virtual void wait(std::chrono::milliseconds timeout = kDefaultTimeout);

  /// The source rank of a completed receive (recvAnysource reports who sent). Throws Error for
  /// other operations or before completion.
  /// \return The group rank the received message came from.
  /// \throws Error before completion or for an op that is not a receive.
  int sourceRank() const;
  /// Whether sourceRank() has a value (a completed receive).
  /// \return True for a completed receive that knows its sender.
  bool hasSourceRank() const { return isCompleted() && sourceRank_ >= 0; }
  /// The tensors the operation wrote (its outputs), once it has succeeded.
  /// \return The outputs (none for an op without any, e.g. barrier).
  /// \throws Error before completion; the op's error (rethrown) when it failed.
  std::vector<Tensor> result() const;
  /// The op's Future, made at the first call: completed with result() or the op's error; its
  /// completion hooks run before any wait() on this Work returns, its callbacks after.
  /// \return The Future, the same one at every call. Asking for it starts a pending op.
  std::shared_ptr<Future> getFuture() const;

  /// "allreduce float32[1024] sum (group 'default', seq 12)": for errors and logs.
  /// \return The op's description.
  std::string description() const;
  /// \return The op's timeout (resolved; a program's backend's Work: the one it was made with).
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// The op as its ProcessGroup issued it: type, dtype, sizes, root, reduce op, peer, tag and the
  /// group's sequence number (op().seq), the same number its errors, the flight recorder and the
  /// other ranks' Works of the same call carry. Default-constructed until ProcessGroup returned
  /// the Work of a program's backend.
  /// \return The op.
  const Op& op() const { return op_; }

 protected:
  /// The producer side: a backend's Work completes itself (a backend a program writes makes a
  /// BackendWork, below). description names the op in errors and logs; ProcessGroup adds the op
  /// (op()) once the backend returns the Work.
  /// \param description the op's description; empty: the one ProcessGroup's op gives it.
  /// \param timeout the op's timeout, which wait() with kDefaultTimeout uses.
  /// \param outputs what result() returns (see outputs_).
  Work(std::string description, std::chrono::milliseconds timeout,
       std::vector<Tensor> outputs = {});
  /// Completes the Work once (later calls are ignored), with success.
  void finish();
  /// Completes the Work once (later calls are ignored), with error. error must be this Work's
  /// alone (not shared with another Work: detail::copyError makes one), because the op's context
  /// (op, group, rank, sequence number, peer) is written into it.
  /// \param error the op's error, which wait() and result() rethrow.
  void finishWithError(std::exception_ptr error);
  /// A receive's sender, before it completes.
  /// \param rank the sender's group rank, which sourceRank() reports.
  void setSourceRank(int rank) { sourceRank_ = rank; }

  /// This library's backends: a Work for op (numbered by its group), reporting to trace.
  /// \param op the op, numbered; its timeout is the Work's.
  /// \param trace the group's trace (may be null: nothing recorded).
  Work(const Op& op, std::shared_ptr<detail::GroupTrace> trace);
  /// Called by wait() before it blocks: a backend may run a queued operation on the waiting
  /// thread instead of handing it to its worker (saves a thread hand-off for blocking calls).
  virtual void beforeWait() {}
  /// Called when the Work's caller shows it is not about to wait (isCompleted() while pending,
  /// getFuture(), a wait() shorter than the op's timeout): a queued op should start now.
  virtual void startAsync() const {}
  /// Completes the Work with error (null: success); false if it was completed already.
  /// \param error the op's error, or null for success.
  /// \return True when this call completed the Work.
  bool complete(std::exception_ptr error);
  /// The same, for a caller that is the op's only possible completer (an op queue's runner,
  /// which took the Work out of its slot): one atomic operation fewer.
  /// \param error the op's error, or null for success.
  void completeAlone(std::exception_ptr error);
  /// A pooled Work (c10d/WorkPool.hpp): rebind makes it op's, as new; recycle releases what its
  /// last op held (a derived Work releases its own tensors, then calls this one).
  /// \param op the Work's next op; its timeout is the Work's.
  virtual void rebind(const Op& op);
  /// A pooled Work's release of what its last op held: its outputs, error and Future (see
  /// rebind).
  virtual void recycle();
  /// What result() returns, written by the backend before the Work completes: outputs_ when it
  /// holds any, else output_ when it is defined (an op of one output keeps no list).
  Tensor output_;
  std::vector<Tensor> outputs_;  ///< the outputs of an op with a list of them (see output_)

 private:
  /// state_'s bits. Done is what waiters wait for; a Work with a Future is Settled first (its
  /// hooks run), Done after.
  static constexpr uint32_t kClaimed = 1;   ///< a completion has begun
  static constexpr uint32_t kSettled = 2;   ///< error_ is written; the op's record is made
  static constexpr uint32_t kDone = 4;      ///< complete: waiters return
  static constexpr uint32_t kSleeping = 8;  ///< a waiter may sleep on the futex
  static constexpr uint32_t kFuture = 16;   ///< getFuture() made future_
  static constexpr uint32_t kBound = 32;    ///< op_ and trace_ are set

  /// ProcessGroup's side, for a Work a program's backend made: the op it runs and the group it
  /// reports to. The first call wins; the error the Work failed with before it (or fails with
  /// later) gets the op's context either way. Works of this library's backends know both from
  /// the start.
  friend class ProcessGroup;
  void bind(const Op& op, const std::shared_ptr<detail::GroupTrace>& trace) {
    if (!(state_.load(std::memory_order_acquire) & kBound)) bindUnbound(op, trace);
  }
  void bindUnbound(const Op& op, const std::shared_ptr<detail::GroupTrace>& trace);
  /// complete()'s rest once error_ is written: the record, then done (state: as last read).
  void settle(uint32_t state);
  /// Blocks until kDone or until; false on timeout.
  bool waitDone(std::chrono::steady_clock::time_point until) const;
  /// What the Future completes with: result()'s tensors, or none after an error.
  std::vector<Tensor> futureValue() const;
  /// The op's context, into error (when it is one of ours).
  void fillContext(const std::exception_ptr& error) const;

  Op op_{};
  std::shared_ptr<detail::GroupTrace> trace_;
  std::string description_;  ///< a program's backend's Works only
  std::chrono::milliseconds timeout_;
  int sourceRank_ = -1;
  std::chrono::steady_clock::time_point started_{};  ///< for C10D_DEBUG's log line only
  std::exception_ptr error_;
  mutable std::atomic<uint32_t> state_{0};
  mutable std::shared_ptr<Future> future_;
  /// A pooled Work's (c10d/WorkPool.hpp): its pool, the next idle Work, and the memory its
  /// handle's control block is built in.
  template <typename T>
  friend class detail::WorkPool;
  std::shared_ptr<void> pool_;
  Work* poolNext_ = nullptr;
  alignas(std::max_align_t) unsigned char handle_[64];
};

/// The Work of a backend a program writes (registerBackend): made when the op starts, completed
/// by the backend with finish() or finishWithError() (from any thread, once), and returned to
/// ProcessGroup, which binds it to the op. Its callers see a Work.
class BackendWork final : public Work {
 public:
  /// \param description the op's description for errors and logs ("doubling allreduce"); empty:
  ///     the one ProcessGroup's op gives it.
  /// \param timeout the op's timeout (its options' timeout), which wait() with kDefaultTimeout
  ///     uses.
  /// \param outputs what result() returns once the Work succeeded.
  BackendWork(std::string description, std::chrono::milliseconds timeout,
              std::vector<Tensor> outputs = {})
      : Work(std::move(description), timeout, std::move(outputs)) {}
  using Work::finish;
  using Work::finishWithError;
  using Work::setSourceRank;
};

}  // namespace c10d::inline v1
