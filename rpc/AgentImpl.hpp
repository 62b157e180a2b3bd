#pragma once

// Private to rpc/: the agent's state. RpcAgent.cpp runs calls (registry, serving, sending,
// shutdown) over the pool (WorkerPool.hpp) and the table of calls waiting for replies with the
// thread that fails late ones (CallTable.hpp); RRefContext.cpp runs the remote-reference
// protocol; DistAutograd.cpp keeps distributed autograd contexts and DistributedOptimizer.cpp
// the optimizers on parameter owners.

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

#include "rpc/CallTable.hpp"
#include "rpc/GradientContexts.hpp"
#include "rpc/RRefTable.hpp"
#include "rpc/RpcAgent.hpp"
#include "rpc/WorkerPool.hpp"
#include "rpc/transport/Transport.hpp"

namespace c10d::inline v1::rpc {

// Names of the agent's own messages; user functions may not start with it.
inline constexpr const char* kAgentPrefix = "c10d.";

// The agent's built-in functions, registered by create() on every worker: distributed
// autograd's (DistAutograd.cpp) and the distributed optimizer's (DistributedOptimizer.cpp).
void registerAutogradFunctions(RpcAgent& agent);
void registerOptimizerFunctions(RpcAgent& agent);

struct RpcAgent::Impl {
  using Pending = detail::CallTable::Pending;
  struct Registered {
    Handler call;            // null for a function that replies later
    Maker make;              // null: remote() cannot call it
    AsyncHandler callAsync;  // a function that replies later (it returns a Future)
  };

  std::shared_ptr<Store> store;
  RpcOptions options;
  WorkerInfo self;
  std::weak_ptr<RpcAgent> agent;  // the public object: RRefs made here reach it through this
  // The same object, for the agent's own threads: they are joined before it is destroyed.
  RpcAgent* front = nullptr;
  std::vector<std::string> names;  // by id
  std::unordered_map<std::string, int> idsByName;
  int worldSize = 0;
  std::unique_ptr<Transport> transport;

  std::mutex registryMutex;
  // Shared, so a call takes its entry without copying the functions in it.
  std::map<std::string, std::shared_ptr<const Registered>> handlers;

  // Pool for incoming calls and for completing outgoing ones.
  detail::WorkerPool pool;
  // Outgoing calls waiting for their replies, and the deadline thread; the calls it fails
  // complete on pool, which is declared first so that it outlives the table.
  detail::CallTable calls{pool};

  std::atomic<bool> shutDown{false};
  std::mutex shutdownMutex;  // one graceful shutdown at a time
  // Set when this worker reaches the shutdown barrier: peers closing after it are expected.
  std::atomic<bool> leaving{false};

  // ---- remote references (RRefContext.cpp runs the protocol over this table) ----
  detail::RRefTable rrefs;
  std::atomic<uint64_t> nextLocalId{1};

  // ---- distributed autograd and optimizer (DistAutograd.cpp, DistributedOptimizer.cpp) ----
  GradientContexts gradients;
  std::mutex optimizerStep;  // one optimizer step at a time on this worker

  // ---- calls (RpcAgent.cpp) ----
  void runOnPool(std::function<void()> task) { pool.post(std::move(task)); }
  int idOf(const std::string& name) const;
  std::string describeWorker(int id) const;
  void addHandler(const std::string& name, Registered registered);
  // The entry of name; RemoteError naming the registered functions when there is none.
  std::shared_ptr<const Registered> lookup(const std::string& name);
  // Runs body, the code of registered function name, turning whatever it throws into the
  // RemoteError its caller gets (naming the function and this worker).
  template <typename Body>
  auto runRegistered(const std::string& name, Body&& body) -> decltype(body());
  // Runs the function registered as name, and done with its result or its error, a RemoteError
  // carrying the message its caller gets: an unknown function (naming the registered ones), or
  // what the function threw. RRefs among the arguments came from peer; those in the result go
  // to it. done runs at once, or for a function that replies later once its Future completes, on
  // whatever thread completes it. done runs once.
  void dispatch(const std::string& name, Packed& arguments, int peer, Done done);
  // What remote() stores: make run on arguments from peer (errors as in dispatch).
  std::shared_ptr<detail::Held> makeValue(const std::string& name, const Maker& make,
                                          Packed& arguments, int peer);
  void serve(int peer, Frame request);
  void respond(int peer, uint64_t id, Packed result);
  void sendError(int peer, uint64_t id, const std::string& message);
  void call(int to, const std::string& function, Packed arguments,
            std::chrono::milliseconds timeout, Done done);
  void onFrame(int peer, Frame frame);
  void onPeerLost(int peer, const std::string& why);
  // The error of a call to a peer whose connection is lost: the same for a call in flight at the
  // loss and one made after it.
  // A call made after this worker shut down, or refused by its closing transport.
  StateError afterShutdownError(const std::string& function, int to) const;
  RemoteError lostCallError(const std::string& function, int to, const std::string& why) const;
  // The error of a call past its deadline, for the deadline thread.
  std::exception_ptr timeoutError(const Pending& late) const;
  // Graceful shutdown's barrier: marks this worker at stage, then waits until every worker is.
  // Throws RemoteError at once when a peer whose connection is lost never got there, and
  // TimeoutError at deadline naming the workers that did not.
  void awaitEveryWorker(const std::string& stage, const char* what,
                        std::chrono::steady_clock::time_point deadline);
  void shutdownGracefully();
  // Closes the transport, fails what is outstanding and stops the threads. Idempotent.
  void close();
  // Throws TimeoutError when calls are still unanswered at deadline; what says at which stage.
  void waitForCalls(std::chrono::steady_clock::time_point deadline, const char* what);
  void stopThreads();

  // ---- remote references (RRefContext.cpp) ----
  detail::GlobalId newId() { return {self.id, nextLocalId.fetch_add(1)}; }
  // An agent message about RRefs, handled on the loop thread in arrival order (so a fork is
  // always registered before its deletion is); false for any other frame.
  bool handleRRefMessage(int peer, Frame& frame);
  // Fire-and-forget protocol message; failures are logged, then (either way) then runs.
  void notify(int to, const char* what, Packed arguments, std::function<void()> then = nullptr);
  // The owner's entry for id, made (without a value yet) when there is none.
  std::shared_ptr<detail::RRefCore> ownedCore(const detail::GlobalId& id);
  void userGone(detail::RRefCore& core);
  // Tells core's owner this fork is gone (once per fork).
  void sendDelete(detail::RRefCore& core);
  // Graceful shutdown: waits for forks in flight, then deletes the forks still held here.
  void settleRRefs(std::chrono::steady_clock::time_point deadline);
};

template <typename Body>
auto RpcAgent::Impl::runRegistered(const std::string& name, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    throw RemoteError("function '" + name + "' on " + describeWorker(self.id) +
                      " failed: " + e.what());
  } catch (...) {
    throw RemoteError("function '" + name + "' on " + describeWorker(self.id) +
                      " failed with an exception that is not a std::exception");
  }
}

}  // namespace c10d::inline v1::rpc
