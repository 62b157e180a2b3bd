#pragma once

/// \file
/// c10d::rpc: calls between named workers, like torch.distributed.rpc. This header holds the
/// agent (RpcAgent), its options and the types its calls use.
///
/// \code
/// auto agent = RpcAgent::create(store, "worker1", rank, worldSize);
/// agent->registerFunction("add", [](int a, int b) { return a + b; });
/// int three = agent->rpcSync<int>("worker0", "add", 1, 2);
/// Future<Tensor> doubled = agent->rpcAsync<Tensor>("worker0", "twice", tensor);
/// \endcode
///
/// Workers find each other through the Store (each publishes its name and address), then keep
/// one TCP connection per pair. Arguments and results are msgpack values (see Serialization.hpp);
/// tensors travel beside them without copies into the message, and between workers on one host
/// large ones are read straight from the sender's memory (RpcOptions::sharedMemory). Limit:
/// everything that is not a tensor (the function's name, msgpack'd values, tensor shapes) is at
/// most 64 MiB per message (kMaxMetaBytes, rpc/transport/Wire.hpp); a larger one fails on the
/// sender with InvalidArgument saying its size. Send bulk data as Tensors (up to 65536 per
/// message, 64 GiB together).
///
/// Errors: what the caller got wrong locally (an unknown worker, a timeout not above zero, an
/// argument that cannot be packed) throws InvalidArgument at the call, and a call after
/// shutdown() throws StateError. An unknown function, arguments of the wrong types, a remote
/// exception, a lost connection and a timeout fail the call's Future (rpcSync throws):
/// RemoteError for what happened on the callee (its message names the worker and the function),
/// TimeoutError for a call that passed its timeout.
/// Workers are named by name and id ("worker 'w2' (id 2)"). A lost connection to a worker is
/// final: calls in flight to it and calls made after the loss fail alike (RemoteError, "the
/// connection was lost (why)").
///
/// Threading: every method may be called from any thread. Registered functions run on the
/// agent's pool of threads (RpcOptions::threads), several at a time.

#include <chrono>
#include <compare>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "rpc/Future.hpp"
#include "rpc/Serialization.hpp"
#include "store/Store.hpp"

/// Remote procedure calls between named workers, remote references (RRef), distributed autograd
/// and the distributed optimizer, like torch.distributed.rpc.
namespace c10d::inline v1::rpc {

/// A worker of an RPC group: its name and its id.
struct WorkerInfo {
  std::string name;  ///< unique among the group's workers
  int id = -1;       ///< the worker's rank, in [0, worldSize); -1 when not set
};

/// Options of RpcAgent::create().
struct RpcOptions {
  /// Default timeout of a call (a call may give its own).
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  /// How long create() waits for every worker to publish itself and connect.
  std::chrono::milliseconds initTimeout = std::chrono::seconds(60);
  /// Threads that run incoming calls.
  int threads = 4;
  /// Address this worker listens on and publishes (its port is chosen by the system). Empty:
  /// the address of C10D_SOCKET_IFNAME when set, else the local address that routes to the
  /// TCPStore's host, else 127.0.0.1 (as the Gloo backend chooses).
  std::string host;
  /// Shared secret every connection between workers must prove before any call is read (see
  /// c10d/net/Auth.hpp). Unset: C10D_AUTH_TOKEN or C10D_AUTH_TOKEN_FILE, or no authentication.
  std::optional<std::string> authToken;
  /// Whether a tensor of 256 KiB or more (kLendBytes) to a worker on this host is copied straight
  /// from this worker's memory by the receiver (process_vm_readv) instead of streamed through TCP
  /// loopback, where both workers allow it and the receiver proved it can read this process.
  /// Unset: C10D_SHM (default on). Either side off keeps TCP both ways. Such a tensor is
  /// read after the call returns: a caller must not change an argument before the call's Future
  /// completes, nor a function change its result (which it owns until the caller has it).
  std::optional<bool> sharedMemory;
};

class RpcAgent;
template <typename T>
class RRef;

/// Base of values that live only on their owner (they hold locks, threads, device state): an
/// RRef to one can run methods there and can be passed around, but toHere() refuses to copy it,
/// and a function returning one can only be called with remote().
struct RemoteObject {};

/// What rrefStats() counts on one worker: owned values that users still reference, and forks in
/// the middle of the protocol. All zero once every reference is gone and every message answered.
struct RRefStats {
  size_t owned = 0;            ///< values this worker owns that some user still holds
  size_t users = 0;            ///< forks of others' values held here, confirmed by their owner
  size_t pendingUsers = 0;     ///< forks held here that their owner has not confirmed yet
  size_t pendingChildren = 0;  ///< references sent away, kept until the owner confirms the fork
};

namespace detail {

/// \cond
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
/// \endcond

/// Whether a registered function's result is an rpc::Future: it replies when that completes.
template <typename R>
struct IsFuture : std::false_type {};
template <typename T>
struct IsFuture<Future<T>> : std::true_type {
  using Value = T;
};

/// Names an RRef or a fork across workers: the worker that made it and its counter there.
struct GlobalId {
  int32_t worker = -1;
  uint64_t local = 0;
  auto operator<=>(const GlobalId&) const = default;
  std::string str() const { return std::to_string(worker) + ":" + std::to_string(local); }
  MSGPACK_DEFINE(worker, local);
};

class Held;
class RRefCore;
struct AgentInternals;

/// While alive on a thread, the RRefs packed or unpacked there travel between this agent and
/// peer: packing forks them for peer, unpacking makes peer their sender.
class RRefScope {
 public:
  RRefScope(const RpcAgent& agent, int peer) : agent(&agent), peer(peer), previous_(current_) {
    current_ = this;
  }
  ~RRefScope() { current_ = previous_; }
  RRefScope(const RRefScope&) = delete;
  RRefScope& operator=(const RRefScope&) = delete;
  static RRefScope* current() { return current_; }

  const RpcAgent* agent;
  int peer;

 private:
  RRefScope* previous_;
  static inline thread_local RRefScope* current_ = nullptr;
};

}  // namespace detail

/// One worker of an RPC group: it registers the functions other workers may call, calls theirs,
/// and makes and serves remote references. Made by create(); closed by shutdown() or by its
/// destructor. Errors and threading are as the file's overview says.
class RpcAgent {
 public:
  /// A raw handler: gets the packed arguments, returns the packed result (or throws).
  using Handler = std::function<Packed(Packed& arguments)>;
  /// A raw handler that replies later (PyTorch's \@rpc.functions.async_execution): it returns at
  /// once, having arranged for reply to be called once, from any thread, with an error or with
  /// a function that packs the result (called there, so RRefs in it go to the caller).
  using Reply = std::function<void(std::exception_ptr error, const std::function<Packed()>* pack)>;
  /// An asynchronous raw handler: gets the packed arguments and the Reply to call once. An
  /// exception it throws before replying is the call's error.
  using AsyncHandler = std::function<void(Packed& arguments, Reply reply)>;
  /// What remote() runs on the owner: the arguments in, the value the RRef will hold out.
  using Maker = std::function<std::shared_ptr<detail::Held>(Packed& arguments)>;

  /// Publishes this worker (name and address) under "rpc/" in store, connects to every other
  /// worker, runs setup (register functions there), and returns once every worker has done all
  /// that, so no call can reach a worker before its functions exist. Names must be unique; ids
  /// are ranks in [0, worldSize). Throws TimeoutError naming the workers that did not appear
  /// within options.initTimeout, InvalidArgument on a duplicate name or bad rank.
  /// \param store The store every worker of the group uses (shared with others; the agent's keys
  ///   are under "rpc/").
  /// \param name This worker's name, unique and not empty.
  /// \param rank This worker's id, in [0, worldSize).
  /// \param worldSize How many workers the group has (at least 1).
  /// \param options See RpcOptions.
  /// \param setup Called once on this thread with the new agent, after every worker is
  ///   connected and before create() returns; null for none.
  /// \return The connected agent.
  /// \throws InvalidArgument also for a null store, an empty name or options.threads < 1.
  static std::shared_ptr<RpcAgent> create(std::shared_ptr<Store> store, std::string name, int rank,
                                          int worldSize, RpcOptions options = {},
                                          const std::function<void(RpcAgent&)>& setup = nullptr);
  /// Non-graceful shutdown(): closes at once, failing outstanding calls.
  ~RpcAgent();
  RpcAgent(const RpcAgent&) = delete;
  RpcAgent& operator=(const RpcAgent&) = delete;

  /// \return This worker's name and id.
  const WorkerInfo& self() const;
  /// Throws InvalidArgument naming the unknown worker and the known ones.
  /// \param name A worker's name.
  /// \return That worker's name and id.
  WorkerInfo workerInfo(const std::string& name) const;
  /// \param id A worker's id.
  /// \return That worker's name and id.
  /// \throws InvalidArgument when id is not in [0, worldSize).
  WorkerInfo workerInfo(int id) const;
  /// \return Every worker of the group, this one included, in order of id.
  std::vector<WorkerInfo> workers() const;
  /// \return The options the agent was created with, as given (unset fields stay unset).
  const RpcOptions& options() const;

  /// Registers fn under name: any callable with msgpack-able (or Tensor, or RRef) parameters and
  /// result; rpcSync/rpcAsync call it, and remote() makes an RRef of its result. Throws
  /// InvalidArgument when name is taken or starts with "c10d." (the agent's own messages).
  /// A function that returns an rpc::Future<T> replies when that future completes, with its
  /// value or its error (PyTorch's \@rpc.functions.async_execution): it may call other workers
  /// and chain on their futures without holding one of this worker's threads meanwhile.
  /// remote() cannot call such a function (InvalidArgument at the call when this worker is the
  /// owner; from another worker, toHere() throws the owner's RemoteError).
  /// \tparam Fn A function pointer or a callable with one, non-overloaded operator().
  /// \param name The name callers use; not empty.
  /// \param fn The function; it runs on this agent's pool, possibly several calls at a time.
  /// \throws InvalidArgument also when name is empty.
  template <typename Fn>
  void registerFunction(const std::string& name, Fn fn) {
    registerTyped(name, std::move(fn), false);
  }
  /// Registers fn(T& self, args...) under name, to run on an RRef<T>'s owner with the owner's
  /// value: RRef<T>::rpcSync(name, args...) (and rpcAsync, remote) call it.
  /// \tparam T The value type of the RRefs the method runs on.
  /// \tparam Fn A callable whose first parameter is a T& (the owner's value) and whose others
  ///   are the method's arguments.
  /// \param name The name the method is called by; registered as registerFunction() does, so
  ///   the same names are refused.
  /// \param fn The method.
  template <typename T, typename Fn>
  void registerMethod(const std::string& name, Fn fn);
  /// Registers a raw handler under name, for callers that pack and unpack themselves. make, when
  /// given, lets remote() call name.
  /// \param name The name callers use.
  /// \param handler Runs each call on the agent's pool.
  /// \param make What remote() runs on this worker; null: remote() cannot call name.
  /// \throws InvalidArgument when name is empty, taken or starts with "c10d.", or handler is
  ///   empty.
  void registerHandler(const std::string& name, Handler handler, Maker make = nullptr);
  /// Registers a raw handler that replies later under name (remote() cannot call it).
  /// \param name The name callers use.
  /// \param handler Runs each call on the agent's pool, and arranges for its reply.
  /// \throws InvalidArgument when name is empty, taken or starts with "c10d.", or handler is
  ///   empty.
  void registerAsyncHandler(const std::string& name, AsyncHandler handler);
  /// Calls function on worker `to` with args; the Future completes with its result (an R).
  /// timeout: the call's own (default: options().timeout).
  /// \tparam R The result's type; void for none.
  /// \tparam A The arguments' types: msgpack-able values, Tensors or RRefs.
  /// \param to The callee worker's name (this worker's own name too).
  /// \param function The name the callee registered the function under.
  /// \param args The function's arguments.
  /// \return A future of the result; a call's errors (see the file's overview) fail it, except
  ///   those thrown at once below.
  /// \throws InvalidArgument at once for an unknown worker or an argument that cannot be packed
  ///   (an undefined Tensor, an empty RRef).
  /// \throws StateError at once after shutdown().
  template <typename R, typename... A>
  Future<R> rpcAsync(const std::string& to, const std::string& function, A&&... args) {
    return rpcAsyncWithTimeout<R>(to, function, options().timeout, std::forward<A>(args)...);
  }
  /// rpcAsync() with the call's own timeout.
  /// \tparam R The result's type; void for none.
  /// \tparam A The arguments' types.
  /// \param to The callee worker's name.
  /// \param function The name the callee registered the function under.
  /// \param timeout How long the call may take before its future fails with TimeoutError;
  ///   positive (else InvalidArgument at once).
  /// \param args The function's arguments.
  /// \return A future of the result, as rpcAsync()'s.
  template <typename R, typename... A>
  Future<R> rpcAsyncWithTimeout(const std::string& to, const std::string& function,
                                std::chrono::milliseconds timeout, A&&... args) {
    return callTyped<R>(idOf(to), function, timeout,
                        [&] { return pack(std::make_tuple(std::forward<A>(args)...)); });
  }
  /// rpcAsync(), waiting for the result: throws what the future would fail with.
  /// \tparam R The result's type; void for none.
  /// \tparam A The arguments' types.
  /// \param to The callee worker's name.
  /// \param function The name the callee registered the function under.
  /// \param args The function's arguments.
  /// \return The function's result.
  template <typename R, typename... A>
  R rpcSync(const std::string& to, const std::string& function, A&&... args) {
    return rpcAsync<R>(to, function, std::forward<A>(args)...).value();
  }

  /// Runs function on worker `to` and returns a reference to its result, which stays there (the
  /// owner). Returns at once; errors of the call reach the RRef's toHere().
  /// \tparam R The type of the function's result, which the RRef holds.
  /// \tparam A The arguments' types.
  /// \param to The owner's name (this worker's own name too).
  /// \param function The name the owner registered the function under, with registerFunction()
  ///   (a function returning a value) or registerHandler() with a Maker.
  /// \param args The function's arguments.
  /// \return A reference to the result on `to`.
  /// \throws InvalidArgument at once for an unknown worker or an argument that cannot be packed.
  /// \throws StateError at once after shutdown().
  /// \throws RemoteError at once when `to` is this worker and function is unknown here
  ///   (InvalidArgument when remote() cannot call it).
  template <typename R, typename... A>
  RRef<R> remote(const std::string& to, const std::string& function, A&&... args);
  /// An RRef owned by this worker, holding value (PyTorch's RRef(value)).
  /// \tparam T The value's type.
  /// \param value The value; the RRef's owner keeps it while any reference to it exists.
  /// \return The new reference, whose value is set already.
  template <typename T>
  RRef<T> makeRRef(T value);
  /// \return The RRefs this worker owns and holds, counted (see RRefStats).
  RRefStats rrefStats() const;

  /// Graceful: waits until this worker's calls and RRef messages are answered, tells the owners
  /// of the RRefs still held here that they are gone, then waits until every worker has done
  /// the same (a barrier through the store) and closes; worker 0, which usually hosts the store,
  /// returns last. It fails at once with RemoteError naming a worker whose connection is lost
  /// before it reached the barrier, and with TimeoutError naming the missing workers after
  /// options().timeout. Non-graceful: closes at once, failing outstanding calls. Either way, and
  /// also when graceful shutdown throws, the agent is closed afterwards: later calls, like those
  /// in flight at the close, fail with StateError. Idempotent.
  /// \param graceful Whether to wait for this worker's calls and every other worker first.
  ///   Called from two threads at once, a graceful call waits for one in progress; a
  ///   non-graceful one closes at once.
  void shutdown(bool graceful = true);

  /// The agent's state, defined in rpc/AgentImpl.hpp for rpc/'s own files; opaque here.
  struct Impl;

 private:
  /// rpc/'s own files (RRef, distributed autograd, the optimizer) reach what follows through
  /// detail::AgentInternals; users call none of it.
  friend struct detail::AgentInternals;
  Impl& impl() const { return *impl_; }
  /// Packs a value (made by pack) for peer, RRefs forked for it.
  template <typename PackFn>
  Packed packFor(int peer, const PackFn& packFn) const {
    detail::RRefScope scope(*this, peer);
    return packFn();
  }
  /// Sends function (args made by packFn) to worker id `to`; the result unpacked as an R.
  template <typename R, typename PackFn>
  Future<R> callTyped(int to, const std::string& function, std::chrono::milliseconds timeout,
                      const PackFn& packFn) {
    Future<R> result;
    result.setExecutor([this](std::function<void()> task) { runOnPool(std::move(task)); });
    callRaw(to, function, packFor(to, packFn), timeout,
            [this, result, function, to](std::exception_ptr error, Packed* reply) mutable {
              if (error) {
                result.setError(error);
                return;
              }
              try {
                if constexpr (std::is_void_v<R>) {
                  (void)this, (void)function, (void)to;  // used for results only
                  result.setValue();
                } else {
                  detail::RRefScope scope(*this, to);
                  result.setValue(unpack<R>(reply->bytes, reply->tensors, [&] {
                    return "result of '" + function + "' from " + describeWorker(to);
                  }));
                }
              } catch (...) {
                result.setError(std::current_exception());
              }
            });
    return result;
  }
  template <typename T>
  Future<T> fetchRRef(const std::shared_ptr<detail::RRefCore>& core,
                      std::chrono::milliseconds timeout);

  /// registerFunction for the agent's own functions (names starting with "c10d.").
  template <typename Fn>
  void registerBuiltin(const std::string& name, Fn fn) {
    registerTyped(name, std::move(fn), true);
  }
  /// done runs on the transport's loop thread (or the pool): it must not block.
  using Done = std::function<void(std::exception_ptr error, Packed* reply)>;
  explicit RpcAgent(std::shared_ptr<Impl> impl);
  void runOnPool(std::function<void()> task);
  int idOf(const std::string& name) const;
  std::string describeWorker(int id) const;
  void callRaw(int to, const std::string& function, Packed arguments,
               std::chrono::milliseconds timeout, Done done);
  std::shared_ptr<detail::RRefCore> remoteRaw(const std::string& to, const std::string& function,
                                              const std::function<Packed()>& packArguments);
  std::shared_ptr<detail::RRefCore> ownedRRef(std::shared_ptr<detail::Held> value);
  template <typename T>
  static std::shared_ptr<detail::Held> makeHeld(T value);
  template <typename Fn>
  void registerTyped(const std::string& name, Fn fn, bool builtin) {
    using Sig = detail::Signature<std::decay_t<Fn>>;
    using Args = typename Sig::Args;
    using R = typename Sig::Result;
    auto shared = std::make_shared<Fn>(std::move(fn));
    if constexpr (detail::IsFuture<R>::value) {
      using T = typename detail::IsFuture<R>::Value;
      AsyncHandler call = [name, shared](Packed& arguments, Reply reply) {
        Args args = unpackArguments<Args>(arguments.bytes, arguments.tensors, name);
        R future = std::apply(*shared, std::move(args));
        future.addCallback([future, reply = std::move(reply)] {
          if (std::exception_ptr error = future.error()) {
            reply(error, nullptr);
            return;
          }
          const std::function<Packed()> packResult = [&future]() -> Packed {
            if constexpr (std::is_void_v<T>) {
              (void)future;
              return pack(std::tuple<>());
            } else {
              return pack(future.value());
            }
          };
          reply(nullptr, &packResult);
        });
      };
      addAsyncHandler(name, std::move(call), builtin);
      return;
    } else {
      Handler call = [name, shared](Packed& arguments) -> Packed {
        if constexpr (std::is_base_of_v<RemoteObject, std::decay_t<R>>) {
          C10D_THROW(InvalidArgument, "'", name,
                     "' returns a value that lives only where it is made (a RemoteObject): call "
                     "it with remote()");
        } else {
          Args args = unpackArguments<Args>(arguments.bytes, arguments.tensors, name);
          if constexpr (std::is_void_v<R>) {
            std::apply(*shared, std::move(args));
            return pack(std::tuple<>());
          } else {
            return pack(std::apply(*shared, std::move(args)));
          }
        }
      };
      Maker make;
      if constexpr (!std::is_void_v<R>) {
        make = [name, shared](Packed& arguments) -> std::shared_ptr<detail::Held> {
          Args args = unpackArguments<Args>(arguments.bytes, arguments.tensors, name);
          return makeHeld(std::apply(*shared, std::move(args)));
        };
      }
      addHandler(name, std::move(call), std::move(make), builtin);
    }
  }
  void addHandler(const std::string& name, Handler handler, Maker make, bool builtin);
  void addAsyncHandler(const std::string& name, AsyncHandler handler, bool builtin);
  template <typename T, typename Fn, typename Self, typename... A>
  void registerMethodImpl(const std::string& name, Fn fn, std::tuple<Self, A...>*);

  std::shared_ptr<Impl> impl_;
};

namespace detail {

/// The one way into RpcAgent's internals, for rpc/'s own files.
struct AgentInternals {
  static RpcAgent::Impl& impl(const RpcAgent& agent) { return agent.impl(); }
  template <typename R, typename PackFn>
  static Future<R> call(RpcAgent& agent, int to, const std::string& function,
                        std::chrono::milliseconds timeout, const PackFn& packFn) {
    return agent.callTyped<R>(to, function, timeout, packFn);
  }
  template <typename T>
  static Future<T> fetch(RpcAgent& agent, const std::shared_ptr<RRefCore>& core,
                         std::chrono::milliseconds timeout) {
    return agent.fetchRRef<T>(core, timeout);
  }
  template <typename Fn>
  static void registerBuiltin(RpcAgent& agent, const std::string& name, Fn fn) {
    agent.registerBuiltin(name, std::move(fn));
  }
  static void registerBuiltinAsync(RpcAgent& agent, const std::string& name,
                                   RpcAgent::AsyncHandler handler) {
    agent.addAsyncHandler(name, std::move(handler), true);
  }
  /// Sends function with arguments packed already; done gets the reply as it came.
  static void callRaw(RpcAgent& agent, int to, const std::string& function, Packed arguments,
                      std::chrono::milliseconds timeout, RpcAgent::Done done) {
    agent.callRaw(to, function, std::move(arguments), timeout, std::move(done));
  }
  static void runOnPool(RpcAgent& agent, std::function<void()> task) {
    agent.runOnPool(std::move(task));
  }
  static std::string describeWorker(const RpcAgent& agent, int id) {
    return agent.describeWorker(id);
  }
};

}  // namespace detail

}  // namespace c10d::inline v1::rpc

#include "rpc/RRef.hpp"
