#pragma once

/// \file
/// Remote references, like torch.distributed.rpc.RRef: the RRef class, and the RpcAgent members
/// that make them.
///
/// \code
/// RRef<Tensor> w = agent->remote<Tensor>("ps", "makeWeights", 1024);  // lives on "ps"
/// Tensor copy = w.toHere();                      // fetched from the owner
/// double norm = w.rpcSync<double>("norm");       // runs registerMethod<Tensor>("norm") on "ps"
/// agent->rpcSync<void>("trainer2", "use", w);    // passed on: trainer2 gets its own fork
/// \endcode
///
/// One worker owns the value (the owner); every other worker that holds the reference is a user
/// and holds a fork of it. The protocol is PyTorch's (its "RRef design" note): the owner keeps the
/// value while any user fork exists and frees it when the last one is deleted; a worker that
/// passes its reference on keeps it until the owner has confirmed the receiver's fork, so the
/// value is never freed while a reference to it is in flight; a user fork is deleted on the owner
/// only after the owner confirmed it. Handles on one worker share that worker's fork; it is
/// deleted when the last handle goes.
///
/// Errors: what the value's creating function threw reaches every toHere() and localValue() as
/// the RemoteError it produced; localValue() on a user, or with a type other than the owner's,
/// throws InvalidArgument; an RRef used after its agent was destroyed throws StateError.
///
/// Threading: RRef handles may be copied, passed and used from any thread.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>

#include "rpc/RpcAgent.hpp"

namespace c10d::inline v1::rpc {

namespace detail {

/// The owner's value, type-erased.
class Held {
 public:
  virtual ~Held() = default;
  /// The value packed for another worker; InvalidArgument for a RemoteObject.
  virtual Packed pack() const = 0;
  virtual const std::type_info& type() const = 0;
  virtual void* address() = 0;
};

template <typename T>
class HeldValue final : public Held {
 public:
  explicit HeldValue(T value) : value_(std::move(value)) {}
  Packed pack() const override {
    if constexpr (std::is_base_of_v<RemoteObject, T>) {
      C10D_THROW(InvalidArgument, "rpc: an RRef to a ", typeid(T).name(),
                 " (a RemoteObject) cannot be copied off its owner; run a method there instead");
    } else {
      return rpc::pack(value_);
    }
  }
  const std::type_info& type() const override { return typeid(T); }
  void* address() override { return &value_; }

 private:
  T value_;
};

/// What one worker knows of one RRef: on the owner its value, on a user its fork. Shared by every
/// RRef handle of this worker; a user's fork is deleted on the owner when the last handle (and
/// every protocol message that holds it) is gone.
class RRefCore {
 public:
  /// The owner's core of a value this worker owns.
  RRefCore(std::weak_ptr<RpcAgent> agent, GlobalId id, int owner);
  /// A user's core: fork of the value with id, owned by owner.
  RRefCore(std::weak_ptr<RpcAgent> agent, GlobalId id, GlobalId fork, int owner);
  ~RRefCore();
  RRefCore(const RRefCore&) = delete;
  RRefCore& operator=(const RRefCore&) = delete;

  const GlobalId& id() const { return id_; }
  const GlobalId& fork() const { return fork_; }
  int ownerId() const { return owner_; }
  bool isOwner() const { return isOwner_; }
  bool confirmed() const { return isOwner_ || confirmed_.load(); }
  /// The agent; StateError when it was destroyed.
  std::shared_ptr<RpcAgent> agent() const;

  /// Owner: the value, once its creating function returned (or its error).
  Future<std::shared_ptr<Held>>& value() { return value_; }
  /// The owner's value of type T; blocks until it exists. Throws InvalidArgument on a user or for
  /// another type, or the creating function's error.
  void* localAddress(const std::type_info& type) const;

  /// User: the owner has registered this fork (set by the protocol).
  void markConfirmed() { confirmed_.store(true); }
  /// User created by remote(): what creating the value failed with, if it did.
  void setCreationError(std::exception_ptr error);
  std::exception_ptr creationError() const;
  /// User: the owner was told it is gone (at shutdown); the destructor then stays silent.
  bool markDeleted() { return !deleted_.exchange(true); }

 private:
  std::weak_ptr<RpcAgent> agent_;
  GlobalId id_;
  GlobalId fork_;
  int owner_;
  bool isOwner_;
  std::atomic<bool> confirmed_{false};
  std::atomic<bool> deleted_{false};
  mutable std::mutex mutex_;
  std::exception_ptr creationError_;
  mutable Future<std::shared_ptr<Held>> value_;
};

/// A reference inside a msgpack value (ext type kRRefExtType), forked for the message's
/// destination; and its reverse on the receiver. Both need the RRef scope that the agent sets
/// around packing and unpacking a call's values.
std::string packRRef(const std::shared_ptr<RRefCore>& core);
std::shared_ptr<RRefCore> unpackRRef(const char* data, size_t size);

}  // namespace detail

/// msgpack extension type of a remote reference.
inline constexpr int8_t kRRefExtType = 2;

/// A reference to a value that one worker owns (see the file's overview). A handle: copies
/// refer to the same value. Members other than defined(), describe() and coreHandle() throw
/// InvalidArgument on an empty RRef.
/// \tparam T The value's type.
template <typename T>
class RRef {
 public:
  /// An empty reference (defined() is false), to assign to.
  RRef() = default;
  /// A handle on a worker's record of a reference; rpc/'s own files make RRefs so.
  /// \param core The record, shared by this worker's handles of the reference.
  explicit RRef(std::shared_ptr<detail::RRefCore> core) : core_(std::move(core)) {}

  /// \return Whether this refers to a value (false for a default-constructed RRef).
  bool defined() const { return core_ != nullptr; }
  /// \return Whether this worker owns the value.
  bool isOwner() const { return core().isOwner(); }
  /// \return The owner's name and id.
  WorkerInfo owner() const { return core().agent()->workerInfo(core().ownerId()); }
  /// True once the owner knows of this worker's fork (always on the owner).
  /// \return Whether the owner has confirmed this worker's fork.
  bool confirmedByOwner() const { return core().confirmed(); }

  /// A copy of the value: fetched from the owner (TimeoutError past timeout, default: the
  /// agent's), or on the owner copied once the creating function has returned (no timeout: the
  /// function runs here). Throws the creating function's error. Not for a RemoteObject (a
  /// compile-time error).
  /// \param timeout How long fetching from the owner may take; 0: the agent's options().timeout.
  /// \return The copy: a T, converted from the owner's value where its type differs.
  T toHere(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
    return toHereAsync(timeout).value();
  }
  /// toHere() without blocking.
  /// \param timeout How long fetching may take; 0: the agent's options().timeout.
  /// \return A future of the copy, failing as toHere() throws.
  Future<T> toHereAsync(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const;

  /// The owner's value itself (not a copy); blocks until it exists. Owner only.
  /// \return The value; it lives at least as long as this handle.
  T& localValue() const { return *static_cast<T*>(core().localAddress(typeid(T))); }

  /// Runs method (registered on the owner with RpcAgent::registerMethod<T>) on the owner's value
  /// with args: PyTorch's rref.rpc_sync().method(args), rpc_async() and remote().
  /// \tparam R The method's result type; void for none.
  /// \tparam A The types of the method's arguments after the value.
  /// \param method The name the method was registered under on the owner.
  /// \param args The method's arguments after the value.
  /// \return A future of the result, with the agent's options().timeout; it fails and throws as
  ///   RpcAgent::rpcAsync()'s does.
  template <typename R, typename... A>
  Future<R> rpcAsync(const std::string& method, A&&... args) const {
    auto agent = core().agent();
    // By owner id: no name to look up (or copy) per call.
    return detail::AgentInternals::call<R>(
        *agent, core().ownerId(), method, agent->options().timeout,
        [&] { return pack(std::make_tuple(*this, std::forward<A>(args)...)); });
  }
  /// rpcAsync(), waiting for the result: throws what the future would fail with.
  /// \tparam R The method's result type; void for none.
  /// \tparam A The types of the method's arguments after the value.
  /// \param method The name the method was registered under on the owner.
  /// \param args The method's arguments after the value.
  /// \return The method's result.
  template <typename R, typename... A>
  R rpcSync(const std::string& method, A&&... args) const {
    return rpcAsync<R>(method, std::forward<A>(args)...).value();
  }
  /// Runs method on the owner as rpcAsync() does, keeping its result there: RpcAgent::remote()
  /// to the owner.
  /// \tparam R The method's result type, which the new RRef holds.
  /// \tparam A The types of the method's arguments after the value.
  /// \param method The name the method was registered under on the owner.
  /// \param args The method's arguments after the value.
  /// \return A reference to the result, owned by this RRef's owner.
  template <typename R, typename... A>
  RRef<R> remote(const std::string& method, A&&... args) const {
    auto agent = core().agent();
    return agent->template remote<R>(owner().name, method, *this, std::forward<A>(args)...);
  }

  /// "RRef(owner 2, id 1:7)" for messages: the owner's id and the RRef's global id.
  /// \return That text; "RRef(empty)" for an empty RRef.
  std::string describe() const;
  /// For rpc/'s own files: this worker's record of the reference.
  /// \return The record, shared by this worker's handles; null for an empty RRef.
  const std::shared_ptr<detail::RRefCore>& coreHandle() const { return core_; }

 private:
  detail::RRefCore& core() const {
    C10D_CHECK(core_ != nullptr, InvalidArgument, "rpc: use of an empty RRef");
    return *core_;
  }
  std::shared_ptr<detail::RRefCore> core_;
};

// ---- RpcAgent members that make RRefs ----

template <typename R, typename... A>
RRef<R> RpcAgent::remote(const std::string& to, const std::string& function, A&&... args) {
  return RRef<R>(remoteRaw(to, function, [&] { return pack(std::make_tuple(args...)); }));
}

template <typename T>
RRef<T> RpcAgent::makeRRef(T value) {
  return RRef<T>(ownedRRef(makeHeld(std::move(value))));
}

template <typename T, typename Fn>
void RpcAgent::registerMethod(const std::string& name, Fn fn) {
  using Sig = detail::Signature<std::decay_t<Fn>>;
  registerMethodImpl<T>(name, std::move(fn), static_cast<typename Sig::Args*>(nullptr));
}

template <typename T, typename Fn, typename Self, typename... A>
void RpcAgent::registerMethodImpl(const std::string& name, Fn fn, std::tuple<Self, A...>*) {
  static_assert(std::is_same_v<std::decay_t<Self>, T>,
                "registerMethod<T>: the function's first parameter must be a T&");
  registerFunction(name, [fn = std::move(fn)](RRef<T> self, A... args) {
    return fn(self.localValue(), std::move(args)...);
  });
}

template <typename T>
std::shared_ptr<detail::Held> RpcAgent::makeHeld(T value) {
  return std::make_shared<detail::HeldValue<T>>(std::move(value));
}

template <typename T>
Future<T> RpcAgent::fetchRRef(const std::shared_ptr<detail::RRefCore>& core,
                              std::chrono::milliseconds timeout) {
  return callTyped<T>(core->ownerId(), "c10d.rref.fetch",
                      timeout.count() > 0 ? timeout : options().timeout,
                      [&] { return pack(std::make_tuple(core->id())); });
}

template <typename T>
Future<T> RRef<T>::toHereAsync(std::chrono::milliseconds timeout) const {
  static_assert(!std::is_base_of_v<RemoteObject, T>,
                "RRef<T>::toHere: a RemoteObject lives only on its owner; run a method there");
  detail::RRefCore& c = core();
  if (c.isOwner()) {
    Future<T> result;
    std::shared_ptr<detail::RRefCore> keep = core_;
    c.value().addCallback([result, keep]() mutable {
      try {
        std::shared_ptr<detail::Held> held = keep->value().value();
        if (held->type() == typeid(T)) {
          result.setValue(*static_cast<const T*>(held->address()));
        } else {  // another type the owner's value converts to (int -> double, ...)
          Packed packed = held->pack();
          result.setValue(unpack<T>(packed.bytes, packed.tensors, [] { return "RRef value"; }));
        }
      } catch (...) {
        result.setError(std::current_exception());
      }
    });
    return result;
  }
  if (std::exception_ptr error = c.creationError()) {
    Future<T> failed;
    failed.setError(error);
    return failed;
  }
  auto agent = c.agent();
  return detail::AgentInternals::fetch<T>(*agent, core_, timeout);
}

template <typename T>
std::string RRef<T>::describe() const {
  if (!core_) return "RRef(empty)";
  return "RRef(owner " + std::to_string(core_->ownerId()) + ", id " + core_->id().str() + ")";
}

}  // namespace c10d::inline v1::rpc

// RRefs inside msgpack values: an extension holding the fork made for the destination.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <typename T>
  struct pack<c10d::rpc::RRef<T>> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& out, const c10d::rpc::RRef<T>& rref) const {
      C10D_CHECK(rref.defined(), c10d::InvalidArgument, "rpc: cannot send an empty RRef");
      std::string body = c10d::rpc::detail::packRRef(rref.coreHandle());
      out.pack_ext(body.size(), c10d::rpc::kRRefExtType);
      out.pack_ext_body(body.data(), body.size());
      return out;
    }
  };

  template <typename T>
  struct convert<c10d::rpc::RRef<T>> {
    const msgpack::object& operator()(const msgpack::object& object,
                                      c10d::rpc::RRef<T>& rref) const {
      if (object.type != msgpack::type::EXT || object.via.ext.type() != c10d::rpc::kRRefExtType) {
        throw msgpack::type_error();
      }
      rref = c10d::rpc::RRef<T>(
          c10d::rpc::detail::unpackRRef(object.via.ext.data(), object.via.ext.size));
      return object;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack
