#pragma once

/// \file
/// rpc::Future<T>: the result of an asynchronous RPC (rpcAsync, RRef::toHereAsync, ...), and
/// waitAll() and whenAll() over several.
///
/// Threading: every method may be called from any thread; the producer completes it once.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace c10d::inline v1::rpc {

/// How long a thread that expects work soon polls before it sleeps (see Future::wait).
inline constexpr std::chrono::microseconds kSpinBeforeBlocking{50};

/// The result of an asynchronous call. Completes exactly once, with a value or an error.
/// Copies share one state: a copy sees the same outcome and the same callbacks.
/// \tparam T The value's type; void for a call that returns nothing.
template <typename T>
class Future {
 public:
  /// A pending future, for a producer to complete with setValue() or setError().
  Future() : state_(std::make_shared<State>()) {}

  /// \return Whether the future has completed (with a value or an error); never blocks.
  bool completed() const {
    std::lock_guard<std::mutex> guard(state_->mutex);
    return state_->done;
  }
  /// Blocks until complete; rethrows the call's error. Polls for kSpinBeforeBlocking first: on
  /// hosts where waking a sleeping thread costs tens of microseconds (virtual CPUs that halt),
  /// that is most of a short call's round trip.
  void wait() const {
    auto spinUntil = std::chrono::steady_clock::now() + kSpinBeforeBlocking;
    while (!state_->doneFlag.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < spinUntil) {
      std::this_thread::yield();  // the thread completing us may need this core
    }
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait(lock, [&] { return state_->done; });
    if (state_->error) std::rethrow_exception(state_->error);
  }
  /// Blocks until complete or timeout: false at the timeout (the call goes on), true once
  /// complete; rethrows the call's error.
  /// \param timeout How long to wait at most.
  /// \return True once complete, false when timeout passed first.
  bool waitFor(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (!state_->changed.wait_for(lock, timeout, [&] { return state_->done; })) return false;
    if (state_->error) std::rethrow_exception(state_->error);
    return true;
  }
  /// Blocks until complete; the value, or the call's error rethrown.
  /// \return A copy of the value (nothing for Future<void>).
  T value() const {
    wait();
    std::lock_guard<std::mutex> guard(state_->mutex);
    if constexpr (!std::is_void_v<T>) return *state_->value;
  }
  /// \return The error the future completed with; null while pending or after a value. Never
  /// blocks.
  std::exception_ptr error() const {
    std::lock_guard<std::mutex> guard(state_->mutex);
    return state_->error;
  }
  /// A future of fn(this future)'s result; fn runs once this one completes (on the agent's pool
  /// for an RPC's future, else on the completing thread), or at once when already complete. An
  /// exception fn throws fails the new future.
  /// \tparam Fn A callable taking a Future<T>.
  /// \param fn Called once with this future, complete; its result (or exception) completes the
  ///   new future.
  /// \return A future of fn's result type.
  template <typename Fn>
  auto then(Fn fn) const -> Future<std::invoke_result_t<Fn, Future<T>>> {
    using R = std::invoke_result_t<Fn, Future<T>>;
    Future<R> next;
    Future<T> self = *this;
    addCallback([next, self, fn = std::move(fn)]() mutable {
      try {
        if constexpr (std::is_void_v<R>) {
          fn(self);
          next.setValue();
        } else {
          next.setValue(fn(self));
        }
      } catch (...) {
        next.setError(std::current_exception());
      }
    });
    return next;
  }

  /// Producer side. executor, when set, runs the callbacks (so a producer on a thread that must
  /// not block, such as the RPC loop thread, never runs user code).
  /// \param executor Given one task that runs the callbacks pending at completion; empty: they
  ///   run on the completing thread. A callback added after completion runs at once on the
  ///   thread that adds it either way.
  void setExecutor(std::function<void(std::function<void()>)> executor) {
    std::lock_guard<std::mutex> guard(state_->mutex);
    state_->executor = std::move(executor);
  }
  /// Producer side: completes the future with a value, wakes its waiters and runs its callbacks.
  /// \tparam V The types T is constructed from.
  /// \param value The arguments T is constructed from (none for Future<void>).
  /// \return True when this call completed the future; false, changing nothing, when it was
  ///   complete already.
  template <typename... V>
  bool setValue(V&&... value) {
    return complete([&](State& state) {
      if constexpr (!std::is_void_v<T>) state.value.emplace(std::forward<V>(value)...);
    });
  }
  /// Producer side: completes the future with an error, as setValue() does with a value.
  /// \param error What value(), wait() and waitFor() rethrow.
  /// \return True when this call completed the future; false, changing nothing, when it was
  ///   complete already.
  bool setError(std::exception_ptr error) {
    return complete([&](State& state) { state.error = std::move(error); });
  }
  /// Runs callback once the future completes (through the executor when one is set, else on the
  /// completing thread), or at once on this thread when it is complete already.
  /// \param callback Called once, without arguments; it reads the outcome from the future.
  void addCallback(std::function<void()> callback) const {
    {
      std::lock_guard<std::mutex> guard(state_->mutex);
      if (!state_->done) {
        state_->callbacks.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

 private:
  struct State;

  /// Completes once: fill stores the outcome under the mutex. False when already complete.
  template <typename Fill>
  bool complete(Fill&& fill) {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard<std::mutex> guard(state_->mutex);
      if (state_->done) return false;
      fill(*state_);
      state_->done = true;
      state_->doneFlag.store(true, std::memory_order_release);
      callbacks.swap(state_->callbacks);
    }
    state_->changed.notify_all();
    runCallbacks(std::move(callbacks));
    return true;
  }

  void runCallbacks(std::vector<std::function<void()>> callbacks) {
    if (callbacks.empty()) return;
    std::function<void(std::function<void()>)> executor;
    {
      std::lock_guard<std::mutex> guard(state_->mutex);
      executor = state_->executor;
    }
    if (!executor) {
      for (auto& callback : callbacks) callback();
      return;
    }
    executor([callbacks = std::move(callbacks)] {
      for (const auto& callback : callbacks) callback();
    });
  }

  struct Empty {};
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::function<void(std::function<void()>)> executor;
    bool done = false;
    std::atomic<bool> doneFlag{false};  ///< done, readable without the mutex
    std::optional<std::conditional_t<std::is_void_v<T>, Empty, T>> value;
    std::exception_ptr error;
    std::vector<std::function<void()>> callbacks;
  };
  std::shared_ptr<State> state_;
};

/// Waits for every future, then rethrows the first error among them (or first, when set: an
/// error the caller met before waiting).
/// \tparam T The futures' value type.
/// \param futures The futures to wait for; all of them are waited for, even after an error.
/// \param first An error to rethrow in preference to theirs; null for none.
template <typename T>
void waitAll(std::vector<Future<T>>& futures, std::exception_ptr first = nullptr) {
  for (Future<T>& future : futures) {
    try {
      future.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

/// A Future that completes once every one of futures has, with the first error among them.
/// \param futures The futures to join; empty: the result is complete at once.
/// \return The joined future: a value once all completed, else the first error it saw (in
///   the order of futures among those complete at the call, then in the order they complete).
inline Future<void> whenAll(std::vector<Future<void>> futures) {
  Future<void> all;
  if (futures.empty()) {
    all.setValue();
    return all;
  }
  struct Join {
    std::atomic<size_t> left;
    std::mutex mutex;
    std::exception_ptr first;
  };
  auto join = std::make_shared<Join>();
  join->left = futures.size();
  for (Future<void>& future : futures) {
    future.addCallback([join, all, future]() mutable {
      if (std::exception_ptr error = future.error()) {
        std::lock_guard<std::mutex> guard(join->mutex);
        if (!join->first) join->first = error;
      }
      if (join->left.fetch_sub(1) != 1) return;
      if (join->first) {
        all.setError(join->first);
      } else {
        all.setValue();
      }
    });
  }
  return all;
}

}  // namespace c10d::inline v1::rpc
