#pragma once

// c10d::rpc: calls between named workers, like torch.distributed.rpc.
//
//   auto agent = RpcAgent::create(store, "worker1", rank, worldSize);
//   agent->registerFunction("add", [](int a, int b) { return a + b; });
//   int three = agent->rpcSync<int>("worker0", "add", 1, 2);
//   Future<Tensor> doubled = agent->rpcAsync<Tensor>("worker0", "twice", tensor);
//
// Workers find each other through the Store (each publishes its name and address), then keep
// one TCP connection per pair. Arguments and results are msgpack values (see Serialization.hpp);
// tensors travel beside them without copies into the message.
//
// Errors: an unknown worker or function, arguments of the wrong types, a remote exception, a
// lost connection and a timeout all fail the call's Future (rpcSync throws): RemoteError for
// what happened on the callee (its message names the worker and the function), TimeoutError
// for a call that passed its timeout, InvalidArgument for what the caller got wrong locally.
//
// Threading: every method may be called from any thread. Registered functions run on the
// agent's pool of threads (RpcOptions::threads), several at a time.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "c10d/Exception.hpp"
#include "c10d/rpc/Serialization.hpp"
#include "c10d/store/Store.hpp"

namespace c10d::rpc {

// How long a thread that expects work soon polls before it sleeps (see Future::wait).
inline constexpr std::chrono::microseconds kSpinBeforeBlocking{50};

struct WorkerInfo {
  std::string name;
  int id = -1;
};

struct RpcOptions {
  // Default timeout of a call (a call may give its own).
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // How long create() waits for every worker to publish itself and connect.
  std::chrono::milliseconds initTimeout = std::chrono::seconds(60);
  // Threads that run incoming calls.
  int threads = 4;
  // Address this worker listens on and publishes (its port is chosen by the system). Empty:
  // the address of C10D_SOCKET_IFNAME when set, else the local address that routes to the
  // TCPStore's host, else 127.0.0.1 (as the Gloo backend chooses).
  std::string host;
};

// The result of an asynchronous call. Completes exactly once, with a value or an error.
template <typename T>
class Future {
 public:
  Future() : state_(std::make_shared<State>()) {}

  bool completed() const {
    std::lock_guard<std::mutex> guard(state_->mutex);
    return state_->done;
  }
  // Blocks until complete; rethrows the call's error. Polls for kSpinBeforeBlocking first: on
  // hosts where waking a sleeping thread costs tens of microseconds (virtual CPUs that halt),
  // that is most of a short call's round trip.
  void wait() const {
    auto spinUntil = std::chrono::steady_clock::now() + kSpinBeforeBlocking;
    while (!state_->doneFlag.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < spinUntil) {
    }
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->changed.wait(lock, [&] { return state_->done; });
    if (state_->error) std::rethrow_exception(state_->error);
  }
  // Blocks until complete; the value, or the call's error rethrown.
  T value() const {
    wait();
    std::lock_guard<std::mutex> guard(state_->mutex);
    if constexpr (!std::is_void_v<T>) return *state_->value;
  }
  std::exception_ptr error() const {
    std::lock_guard<std::mutex> guard(state_->mutex);
    return state_->error;
  }
  // A future of fn(this future)'s result; fn runs once this one completes (on the agent's pool
  // for an RPC's future, else on the completing thread), or at once when already complete. An
  // exception fn throws fails the new future.
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

  // Producer side. executor, when set, runs the callbacks (so a producer on a thread that must
  // not block, such as the RPC loop thread, never runs user code).
  void setExecutor(std::function<void(std::function<void()>)> executor) {
    std::lock_guard<std::mutex> guard(state_->mutex);
    state_->executor = std::move(executor);
  }
  template <typename... V>
  bool setValue(V&&... value) {
    return complete([&](State& state) {
      if constexpr (!std::is_void_v<T>) state.value.emplace(std::forward<V>(value)...);
    });
  }
  bool setError(std::exception_ptr error) {
    return complete([&](State& state) { state.error = std::move(error); });
  }
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

  // Completes once: fill stores the outcome under the mutex. False when already complete.
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
    std::atomic<bool> doneFlag{false};  // done, readable without the mutex
    std::optional<std::conditional_t<std::is_void_v<T>, Empty, T>> value;
    std::exception_ptr error;
    std::vector<std::function<void()>> callbacks;
  };
  std::shared_ptr<State> state_;
};

namespace detail {

template <typename T>
struct Signature : Signature<decltype(&T::operator())> {};
template <typename R, typename... A>
struct Signature<R (*)(A...)> {
  using Result = R;
  using Args = std::tuple<std::decay_t<A>...>;
};
template <typename C, typename R, typename... A>
struct Signature<R (C::*)(A...) const> : Signature<R (*)(A...)> {};
template <typename C, typename R, typename... A>
struct Signature<R (C::*)(A...)> : Signature<R (*)(A...)> {};

}  // namespace detail

class RpcAgent {
 public:
  // A raw handler: gets the packed arguments, returns the packed result (or throws).
  using Handler = std::function<Packed(Packed& arguments)>;

  // Publishes this worker (name and address) under "rpc/" in store, connects to every other
  // worker, runs setup (register functions there), and returns once every worker has done all
  // that, so no call can reach a worker before its functions exist. Names must be unique; ids
  // are ranks in [0, worldSize). Throws TimeoutError naming the workers that did not appear
  // within options.initTimeout, InvalidArgument on a duplicate name or bad rank.
  static std::shared_ptr<RpcAgent> create(std::shared_ptr<Store> store, std::string name, int rank,
                                          int worldSize, RpcOptions options = {},
                                          const std::function<void(RpcAgent&)>& setup = nullptr);
  ~RpcAgent();
  RpcAgent(const RpcAgent&) = delete;
  RpcAgent& operator=(const RpcAgent&) = delete;

  const WorkerInfo& self() const;
  // Throws InvalidArgument naming the unknown worker and the known ones.
  WorkerInfo workerInfo(const std::string& name) const;
  WorkerInfo workerInfo(int id) const;
  std::vector<WorkerInfo> workers() const;
  const RpcOptions& options() const;

  // Registers fn under name: any callable with msgpack-able (or Tensor) parameters and result.
  // Throws InvalidArgument when name is taken.
  template <typename Fn>
  void registerFunction(const std::string& name, Fn fn) {
    using Sig = detail::Signature<std::decay_t<Fn>>;
    using Args = typename Sig::Args;
    using R = typename Sig::Result;
    registerHandler(name, [name, fn = std::move(fn)](Packed& arguments) -> Packed {
      Args args = unpackArguments<Args>(arguments.bytes, arguments.tensors, name);
      if constexpr (std::is_void_v<R>) {
        std::apply(fn, std::move(args));
        return pack(std::tuple<>());
      } else {
        return pack(std::apply(fn, std::move(args)));
      }
    });
  }
  void registerHandler(const std::string& name, Handler handler);

  // Calls function on worker `to` with args; the Future completes with its result (an R).
  // timeout: the call's own (default: options().timeout).
  template <typename R, typename... A>
  Future<R> rpcAsync(const std::string& to, const std::string& function, A&&... args) {
    return rpcAsyncWithTimeout<R>(to, function, options().timeout, std::forward<A>(args)...);
  }
  template <typename R, typename... A>
  Future<R> rpcAsyncWithTimeout(const std::string& to, const std::string& function,
                                std::chrono::milliseconds timeout, A&&... args) {
    Future<R> result;
    result.setExecutor([this](std::function<void()> task) { runOnPool(std::move(task)); });
    callRaw(to, function, pack(std::make_tuple(std::forward<A>(args)...)), timeout,
            [result, function, to](std::exception_ptr error, Packed* reply) mutable {
              if (error) {
                result.setError(error);
                return;
              }
              try {
                if constexpr (std::is_void_v<R>) {
                  result.setValue();
                } else {
                  result.setValue(unpack<R>(reply->bytes, reply->tensors, [&] {
                    return "result of '" + function + "' from worker '" + to + "'";
                  }));
                }
              } catch (...) {
                result.setError(std::current_exception());
              }
            });
    return result;
  }
  template <typename R, typename... A>
  R rpcSync(const std::string& to, const std::string& function, A&&... args) {
    return rpcAsync<R>(to, function, std::forward<A>(args)...).value();
  }

  // Graceful: waits until every worker has called shutdown (a barrier through the store) and
  // this worker's outstanding calls have completed, then closes; worker 0, which usually hosts
  // the store, returns last. Non-graceful: closes at once,
  // failing outstanding calls. Later calls fail with InvalidArgument. Idempotent.
  void shutdown(bool graceful = true);

  struct Impl;

 private:
  // reply runs on the transport's loop thread (or the pool): it must not block.
  using Reply = std::function<void(std::exception_ptr error, Packed* reply)>;
  explicit RpcAgent(std::shared_ptr<Impl> impl);
  void runOnPool(std::function<void()> task);
  void callRaw(const std::string& to, const std::string& function, Packed arguments,
               std::chrono::milliseconds timeout, Reply reply);

  std::shared_ptr<Impl> impl_;
};

}  // namespace c10d::rpc
