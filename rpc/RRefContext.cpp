// The remote-reference protocol (PyTorch's RRef design), on one worker:
//
//   remote(owner, f)  creator makes a user fork F = the RRef's id, held in pendingUsers until
//                     the owner answers "c10d.rref.remote" (it registers F first, then runs f).
//   pack for peer     owner: registers a new fork for peer at once (early registration).
//                     user: keeps its own fork in pendingChildren until the owner has accepted
//                     the child, so the value cannot be freed while the reference is in flight.
//   unpack from peer  on the owner: the owner's core, and "c10d.rref.accept" to peer.
//                     on a user, from the owner: a confirmed fork.
//                     on a user, from a user: a pending fork; "c10d.rref.fork" to the owner, and
//                     once it answers, "c10d.rref.accept" to the sender.
//   last handle gone  user: "c10d.rref.delete" to the owner, which frees the value when its last
//                     fork is deleted. A fork still pending cannot go: pendingUsers holds it.
//
// Messages that change the owner's table are handled on the transport's loop thread in arrival
// order, so a fork's registration always comes before its deletion.

#include <msgpack.hpp>

#include <string_view>

#include "c10d/core/Logging.hpp"
#include "rpc/AgentImpl.hpp"
#include "rpc/RRef.hpp"

namespace c10d::inline v1::rpc {

namespace detail {
namespace {

// What a reference carries on the wire.
struct RRefWire {
  int32_t owner = -1;
  GlobalId id;
  GlobalId fork;
  int32_t parent = -1;  // the worker that sent it
  MSGPACK_DEFINE(owner, id, fork, parent);
};

RRefScope& requireScope(const char* what) {
  RRefScope* scope = RRefScope::current();
  C10D_CHECK(scope != nullptr, InvalidArgument, "rpc: an RRef can only be ", what,
             " as part of an RPC (not by a bare pack/unpack)");
  return *scope;
}

}  // namespace

// ---- RRefCore ----

RRefCore::RRefCore(std::weak_ptr<RpcAgent> agent, GlobalId id, int owner)
    : agent_(std::move(agent)), id_(id), owner_(owner), isOwner_(true) {}

RRefCore::RRefCore(std::weak_ptr<RpcAgent> agent, GlobalId id, GlobalId fork, int owner)
    : agent_(std::move(agent)), id_(id), fork_(fork), owner_(owner), isOwner_(false) {}

RRefCore::~RRefCore() {
  if (isOwner_ || deleted_.load()) return;
  if (std::shared_ptr<RpcAgent> agent = agent_.lock())
    detail::AgentInternals::impl(*agent).userGone(*this);
}

std::shared_ptr<RpcAgent> RRefCore::agent() const {
  std::shared_ptr<RpcAgent> agent = agent_.lock();
  C10D_CHECK(agent != nullptr, StateError, "rpc: RRef ", id_.str(),
             " used after its agent was destroyed");
  return agent;
}

void* RRefCore::localAddress(const std::type_info& type) const {
  C10D_CHECK(isOwner_, InvalidArgument, "rpc: localValue() of RRef ", id_.str(),
             " on a user; its owner is worker ", owner_, " (use toHere() for a copy)");
  std::shared_ptr<Held> held = value_.value();
  C10D_CHECK(held->type() == type, InvalidArgument, "rpc: localValue() of RRef ", id_.str(),
             " asks for a ", type.name(), " but the owner holds a ", held->type().name());
  return held->address();
}

void RRefCore::setCreationError(std::exception_ptr error) {
  std::lock_guard<std::mutex> guard(mutex_);
  creationError_ = std::move(error);
}

std::exception_ptr RRefCore::creationError() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return creationError_;
}

// ---- on the wire ----

std::string packRRef(const std::shared_ptr<RRefCore>& core) {
  RRefScope& scope = requireScope("sent");
  RpcAgent::Impl& impl = detail::AgentInternals::impl(*scope.agent);
  C10D_CHECK(core->agent().get() == scope.agent, InvalidArgument, "rpc: RRef ", core->id().str(),
             " belongs to another agent than the one sending it");
  RRefWire wire{core->ownerId(), core->id(), impl.newId(), impl.self.id};
  if (core->isOwner() && scope.peer != impl.self.id) {
    impl.rrefs.addFork(core, wire.fork);
  } else {
    // Kept until the receiver's fork is confirmed (or, sent to ourselves, until unpacked here).
    impl.rrefs.addPendingChild(wire.fork, core);
  }
  std::string body;
  StringSink sink{body};
  msgpack::pack(sink, wire);
  return body;
}

std::shared_ptr<RRefCore> unpackRRef(const char* data, size_t size) {
  RRefScope& scope = requireScope("received");
  RpcAgent::Impl& impl = detail::AgentInternals::impl(*scope.agent);
  RRefWire wire;
  try {
    msgpack::object_handle handle = unpackBounded(data, size);
    handle.get().convert(wire);
  } catch (const std::exception&) {
    throw msgpack::type_error();
  }
  const int self = impl.self.id;
  C10D_CHECK(wire.owner >= 0 && wire.owner < impl.worldSize && wire.parent == scope.peer,
             InvalidArgument, "rpc: malformed RRef from ", impl.describeWorker(scope.peer),
             " (owner ", wire.owner, ", sender ", wire.parent, ")");
  if (wire.parent == self) {
    std::shared_ptr<RRefCore> core = impl.rrefs.takePendingChild(wire.fork);
    C10D_CHECK(core != nullptr, StateError, "rpc: RRef ", wire.id.str(),
               " sent to itself was already received");
    return core;
  }
  if (wire.owner == self) {
    std::shared_ptr<RRefCore> core = impl.rrefs.owned(wire.id);
    C10D_CHECK(core != nullptr, StateError, "rpc: RRef ", wire.id.str(), " from ",
               impl.describeWorker(scope.peer), " is no longer held on its owner");
    impl.notify(wire.parent, "c10d.rref.accept", pack(std::make_tuple(wire.fork)));
    return core;
  }
  auto core = std::make_shared<RRefCore>(impl.agent, wire.id, wire.fork, wire.owner);
  if (wire.parent == wire.owner) {
    // The owner registered this fork before sending it.
    core->markConfirmed();
    impl.rrefs.addUser(core);
    return core;
  }
  impl.rrefs.addPendingUser(core);
  RpcAgent::Impl* raw = &impl;
  GlobalId fork = wire.fork;
  int parent = wire.parent;
  impl.notify(wire.owner, "c10d.rref.fork", pack(std::make_tuple(wire.id, fork)),
              [raw, fork, parent] {
                raw->rrefs.confirmUser(fork);
                raw->notify(parent, "c10d.rref.accept", pack(std::make_tuple(fork)));
              });
  return core;
}

}  // namespace detail

using detail::GlobalId;
using detail::RRefCore;

// ---- Impl: tables ----

std::shared_ptr<RRefCore> RpcAgent::Impl::ownedCore(const GlobalId& id) {
  return rrefs.ownedOrMake(id, [&] { return std::make_shared<RRefCore>(agent, id, self.id); });
}

void RpcAgent::Impl::userGone(RRefCore& core) {
  rrefs.removeUser(core.fork());
  if (!shutDown.load()) sendDelete(core);
}

void RpcAgent::Impl::sendDelete(RRefCore& core) {
  if (!core.markDeleted()) return;
  notify(core.ownerId(), "c10d.rref.delete", pack(std::make_tuple(core.id(), core.fork())));
}

void RpcAgent::Impl::notify(int to, const char* what, Packed arguments,
                            std::function<void()> then) {
  std::string name = what;
  try {
    call(to, name, std::move(arguments), options.timeout,
         [this, name, to, then](std::exception_ptr error, Packed*) {
           if (error) {
             try {
               std::rethrow_exception(error);
             } catch (const std::exception& e) {
               C10D_LOG(Warning, "rpc worker '", self.name, "': ", name, " to ", describeWorker(to),
                        " failed: ", e.what());
             }
           }
           if (then) then();
         });
  } catch (const std::exception& e) {
    C10D_LOG(Warning, "rpc worker '", self.name, "': cannot send ", name, " to ",
             describeWorker(to), ": ", e.what());
    if (then) then();
  }
}

// ---- Impl: messages ----

bool RpcAgent::Impl::handleRRefMessage(int peer, Frame& frame) {
  constexpr std::string_view kPrefix = "c10d.rref.";
  if (std::string_view(frame.name).substr(0, kPrefix.size()) != kPrefix) return false;
  const std::string_view op = std::string_view(frame.name).substr(kPrefix.size());
  const uint64_t requestId = frame.id;
  std::vector<std::shared_ptr<RRefCore>> dropped;  // released after the lock, and after replying
  try {
    Packed arguments{std::move(frame.payload), std::move(frame.tensors)};
    auto what = [&] { return "'" + frame.name + "' from " + describeWorker(peer); };
    if (op == "remote") {
      // The fork is registered now, in arrival order; the function runs on the pool.
      auto [id, fork, function, inner] =
          unpack<std::tuple<GlobalId, GlobalId, std::string, std::string>>(arguments.bytes,
                                                                           arguments.tensors, what);
      std::shared_ptr<RRefCore> core = ownedCore(id);
      rrefs.addFork(core, fork);
      Packed innerArguments{std::move(inner), std::move(arguments.tensors)};
      runOnPool([this, peer, requestId, core, function = std::move(function),
                 innerArguments = std::move(innerArguments)]() mutable {
        try {
          std::shared_ptr<const Registered> registered = lookup(function);
          C10D_CHECK(registered->make != nullptr, RemoteError, "function '", function, "' on ",
                     describeWorker(self.id),
                     " returns nothing, replies later (returns a Future), or was registered as "
                     "a raw handler: remote() cannot hold its result");
          core->value().setValue(makeValue(function, registered->make, innerArguments, peer));
        } catch (const std::exception& e) {
          core->value().setError(std::current_exception());
          sendError(peer, requestId, e.what());
          return;
        }
        respond(peer, requestId, pack(std::tuple<>()));
      });
      return true;
    }
    if (op == "fetch") {
      auto [id] = unpack<std::tuple<GlobalId>>(arguments.bytes, arguments.tensors, what);
      std::shared_ptr<RRefCore> core = rrefs.owned(id);
      C10D_CHECK(core != nullptr, RemoteError, "RRef ", id.str(), " is not held on its owner ",
                 describeWorker(self.id), " (every reference to it was deleted)");
      core->value().addCallback([this, peer, requestId, core] {
        try {
          std::shared_ptr<detail::Held> held = core->value().value();
          detail::RRefScope scope(*front, peer);
          respond(peer, requestId, held->pack());
        } catch (const std::exception& e) {
          sendError(peer, requestId, e.what());
        }
      });
      return true;
    }
    if (op == "fork") {
      auto [id, fork] =
          unpack<std::tuple<GlobalId, GlobalId>>(arguments.bytes, arguments.tensors, what);
      rrefs.addFork(ownedCore(id), fork);
    } else if (op == "accept") {
      auto [fork] = unpack<std::tuple<GlobalId>>(arguments.bytes, arguments.tensors, what);
      dropped.push_back(rrefs.takePendingChild(fork));
    } else if (op == "delete") {
      auto [id, fork] =
          unpack<std::tuple<GlobalId, GlobalId>>(arguments.bytes, arguments.tensors, what);
      dropped.push_back(rrefs.deleteFork(id, fork));
    } else {
      C10D_THROW(RemoteError, "unknown agent message '", frame.name, "' on ",
                 describeWorker(self.id));
    }
  } catch (const std::exception& e) {
    sendError(peer, requestId, e.what());
    return true;
  }
  respond(peer, requestId, pack(std::tuple<>()));
  return true;
}

void RpcAgent::Impl::settleRRefs(std::chrono::steady_clock::time_point deadline) {
  // References still held here are gone for their owners now.
  detail::RRefTable::Settled settled = rrefs.settle(deadline);
  if (settled.pendingUsers + settled.pendingChildren > 0) {
    C10D_LOG(Warning, "rpc worker '", self.name, "': graceful shutdown: ", settled.pendingUsers,
             " RRef fork(s) still unconfirmed and ", settled.pendingChildren,
             " sent RRef(s) not accepted after ", options.timeout.count(), " ms");
  }
  for (auto& core : settled.liveUsers) sendDelete(*core);
}

// ---- RpcAgent ----

std::shared_ptr<RRefCore> RpcAgent::remoteRaw(const std::string& to, const std::string& function,
                                              const std::function<Packed()>& packArguments) {
  Impl& impl = *impl_;
  C10D_CHECK(!impl.shutDown.load(), StateError, "rpc: remote '", function, "' to '", to,
             "' after worker '", impl.self.name, "' shut down");
  const int owner = impl.idOf(to);
  const GlobalId id = impl.newId();
  if (owner == impl.self.id) {
    auto core = std::make_shared<RRefCore>(impl.agent, id, owner);
    Packed arguments = packFor(owner, packArguments);
    std::shared_ptr<const Impl::Registered> registered = impl.lookup(function);
    C10D_CHECK(registered->make != nullptr, InvalidArgument, "rpc: remote '", function,
               "' on worker '", to,
               "': the function returns nothing, replies later (returns a Future), or was "
               "registered as a raw handler");
    impl.runOnPool([&impl, core, function, registered, arguments = std::move(arguments)]() mutable {
      try {
        core->value().setValue(impl.makeValue(function, registered->make, arguments, impl.self.id));
      } catch (...) {
        core->value().setError(std::current_exception());
      }
    });
    return core;
  }
  // The creator's own fork has the RRef's id; it is pending until the owner registered it.
  auto core = std::make_shared<RRefCore>(impl.agent, id, id, owner);
  Packed inner = packFor(owner, packArguments);
  Packed arguments = pack(std::make_tuple(id, id, function, std::move(inner.bytes)));
  arguments.tensors = std::move(inner.tensors);
  impl.rrefs.addPendingUser(core);
  Impl* raw = impl_.get();
  std::weak_ptr<RRefCore> weak = core;
  impl.call(owner, "c10d.rref.remote", std::move(arguments), impl.options.timeout,
            [raw, id, weak](std::exception_ptr error, Packed*) {
              if (error) {
                if (auto c = weak.lock()) c->setCreationError(error);
              }
              raw->rrefs.confirmUser(id);
            });
  return core;
}

std::shared_ptr<RRefCore> RpcAgent::ownedRRef(std::shared_ptr<detail::Held> value) {
  auto core = std::make_shared<RRefCore>(impl_->agent, impl_->newId(), impl_->self.id);
  core->value().setValue(std::move(value));
  return core;
}

RRefStats RpcAgent::rrefStats() const {
  return impl_->rrefs.stats();
}

}  // namespace c10d::inline v1::rpc
