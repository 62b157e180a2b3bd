// The RPC agent: a registry of functions, serving incoming calls on the pool (WorkerPool.cpp),
// sending calls whose replies wait in the call table (CallTable.cpp, with the thread that fails
// the late ones), over the Transport; creation and shutdown. The RRef protocol is in
// RRefContext.cpp.

#include "rpc/RpcAgent.hpp"

#include <algorithm>
#include <thread>

#include "c10d/core/Config.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/Auth.hpp"
#include "c10d/net/LocalAddress.hpp"
#include "rpc/AgentImpl.hpp"
#include "store/PrefixStore.hpp"
#include "store/TCPStore.hpp"

namespace c10d::inline v1::rpc {

namespace {

std::string rankKey(const char* what, int rank) {
  return std::string(what) + "/" + std::to_string(rank);
}

// With more calls than this in flight, a request joins the transport's next batched write
// instead of making a system call of its own: nobody waits on that one call alone, and a
// pipelined caller's burst then costs a few writes, not one per call (docs/performance.md).
constexpr size_t kBatchAboveInFlight = 8;

bool isAgentMessage(const std::string& name) {
  return name.rfind(kAgentPrefix, 0) == 0;
}

}  // namespace

// ---- Impl: serving calls ----

int RpcAgent::Impl::idOf(const std::string& name) const {
  auto it = idsByName.find(name);
  if (it != idsByName.end()) return it->second;
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  C10D_THROW(InvalidArgument, "rpc: no worker named '", name, "' (workers: ", known, ")");
}

std::string RpcAgent::Impl::describeWorker(int id) const {
  return "worker '" + names[id] + "' (id " + std::to_string(id) + ")";
}

void RpcAgent::Impl::addHandler(const std::string& name, Registered registered) {
  std::lock_guard<std::mutex> guard(registryMutex);
  C10D_CHECK(handlers.count(name) == 0, InvalidArgument, "rpc: function '", name,
             "' is already registered on worker '", self.name, "'");
  handlers[name] = std::make_shared<const Registered>(std::move(registered));
}

std::shared_ptr<const RpcAgent::Impl::Registered> RpcAgent::Impl::lookup(const std::string& name) {
  std::lock_guard<std::mutex> guard(registryMutex);
  auto it = handlers.find(name);
  if (it != handlers.end()) return it->second;
  std::string registered;
  for (const auto& entry : handlers) {
    if (isAgentMessage(entry.first)) continue;
    registered += (registered.empty() ? "" : ", ") + entry.first;
  }
  throw RemoteError("unknown function '" + name + "' on " + describeWorker(self.id) +
                    "; registered: " + (registered.empty() ? "none" : registered));
}

void RpcAgent::Impl::dispatch(const std::string& name, Packed& arguments, int peer, Done done) {
  std::shared_ptr<const Registered> registered;
  try {
    registered = lookup(name);
  } catch (...) {
    done(std::current_exception(), nullptr);
    return;
  }
  if (!registered->callAsync) {
    Packed result;
    try {
      detail::RRefScope scope(*front, peer);
      result = runRegistered(name, [&] { return registered->call(arguments); });
    } catch (...) {
      done(std::current_exception(), nullptr);
      return;
    }
    done(nullptr, &result);
    return;
  }
  // The reply may come from any thread, after this agent shut down or was destroyed: it holds
  // the agent while it answers, and answers nothing once the agent is gone.
  auto once = std::make_shared<std::atomic<bool>>(false);
  auto shared = std::make_shared<Done>(std::move(done));
  Reply reply = [this, agent = this->agent, once, shared, name, peer](
                    std::exception_ptr error, const std::function<Packed()>* pack) {
    auto alive = agent.lock();
    if (alive == nullptr || once->exchange(true)) return;
    Packed result;
    try {
      if (error) std::rethrow_exception(error);
      detail::RRefScope scope(*front, peer);
      result = (*pack)();
    } catch (...) {
      try {
        runRegistered(name, [&] { std::rethrow_exception(std::current_exception()); });
      } catch (...) {
        (*shared)(std::current_exception(), nullptr);
      }
      return;
    }
    (*shared)(nullptr, &result);
  };
  try {
    detail::RRefScope scope(*front, peer);
    runRegistered(name, [&] { registered->callAsync(arguments, reply); });
  } catch (...) {
    if (!once->exchange(true)) (*shared)(std::current_exception(), nullptr);
  }
}

std::shared_ptr<detail::Held> RpcAgent::Impl::makeValue(const std::string& name, const Maker& make,
                                                        Packed& arguments, int peer) {
  detail::RRefScope scope(*front, peer);
  return runRegistered(name, [&] { return make(arguments); });
}

void RpcAgent::Impl::sendError(int peer, uint64_t id, const std::string& message) {
  if (shutDown.load()) return;  // nobody is connected any more
  Frame error;
  error.kind = FrameKind::Error;
  error.id = id;
  error.name = message;
  try {
    transport->send(peer, std::move(error));
  } catch (const std::exception& e) {
    C10D_LOG(Warning, "rpc worker '", self.name, "': cannot answer ", describeWorker(peer), ": ",
             e.what());
  }
}

void RpcAgent::Impl::respond(int peer, uint64_t id, Packed result) {
  if (shutDown.load()) return;
  Frame response;
  response.kind = FrameKind::Response;
  response.id = id;
  response.payload = std::move(result.bytes);
  response.tensors = std::move(result.tensors);
  try {
    // While more calls wait for the pool, their responses will follow this one: let the loop
    // thread write them together (a pipelined client's burst then costs the server a few
    // system calls instead of one per call).
    transport->send(peer, std::move(response), pool.queued() > 0);
  } catch (const std::exception& e) {
    sendError(peer, id,
              "the result from " + describeWorker(self.id) + " could not be sent: " + e.what());
  }
}

void RpcAgent::Impl::serve(int peer, Frame request) {
  Packed arguments{std::move(request.payload), std::move(request.tensors)};
  const uint64_t id = request.id;
  dispatch(request.name, arguments, peer,
           [this, peer, id](std::exception_ptr error, Packed* result) {
             if (!error) {
               respond(peer, id, std::move(*result));
               return;
             }
             try {
               std::rethrow_exception(error);
             } catch (const std::exception& e) {
               sendError(peer, id, e.what());
             }
           });
}

void RpcAgent::Impl::onFrame(int peer, Frame frame) {
  switch (frame.kind) {
    case FrameKind::Request:
      if (handleRRefMessage(peer, frame)) return;
      runOnPool(
          [this, peer, frame = std::move(frame)]() mutable { serve(peer, std::move(frame)); });
      return;
    case FrameKind::Response:
    case FrameKind::Error: {
      std::optional<Pending> call = calls.take(frame.id);
      if (!call) return;  // timed out already
      // Completed here, on the loop thread: the reply only unpacks and wakes the caller (the
      // future's then-callbacks go to the pool), which saves a hand-off per call.
      if (frame.kind == FrameKind::Error) {
        call->reply(std::make_exception_ptr(RemoteError(
                        frame.name, ErrorContext{.op = call->function, .worker = names[call->to]})),
                    nullptr);
      } else {
        Packed reply{std::move(frame.payload), std::move(frame.tensors)};
        call->reply(nullptr, &reply);
      }
      return;
    }
    default:
      C10D_LOG(Warning, "rpc worker '", self.name, "': unexpected frame kind ", int(frame.kind),
               " from ", describeWorker(peer));
  }
}

// ---- Impl: outgoing calls ----

void RpcAgent::Impl::call(int to, const std::string& function, Packed arguments,
                          std::chrono::milliseconds timeout, Done reply) {
  if (shutDown.load()) throw afterShutdownError(function, to);
  C10D_CHECK(timeout.count() > 0, InvalidArgument, "rpc: call '", function,
             "': timeout must be positive, got ", timeout.count(), " ms");
  if (to == self.id) {
    // A call to oneself runs on the pool, as a remote one would.
    runOnPool(
        [this, function, arguments = std::move(arguments), reply = std::move(reply)]() mutable {
          dispatch(function, arguments, self.id, std::move(reply));
        });
    return;
  }
  uint64_t id = calls.newId();
  Frame request;
  request.kind = FrameKind::Request;
  request.id = id;
  request.name = function;
  request.payload = std::move(arguments.bytes);
  request.tensors = std::move(arguments.tensors);
  size_t inFlight = calls.add(id, std::move(reply), timeout, to, function);
  try {
    transport->send(to, std::move(request), inFlight > kBatchAboveInFlight);
  } catch (const PeerLostError& e) {
    if (auto failed = calls.take(id)) {
      // This worker shutting down closes its connections too: that is the shutdown's StateError,
      // as for the calls in flight then. Otherwise the peer was lost, and the call fails like
      // the ones in flight at the loss.
      failed->reply(shutDown.load() ? std::make_exception_ptr(afterShutdownError(function, to))
                                    : std::make_exception_ptr(lostCallError(function, to, e.why())),
                    nullptr);
    }
  } catch (const StateError&) {
    // This worker shut down between the check above and the send: as a call after it.
    if (auto failed = calls.take(id)) {
      failed->reply(std::make_exception_ptr(afterShutdownError(function, to)), nullptr);
    }
  } catch (...) {
    if (auto failed = calls.take(id)) failed->reply(std::current_exception(), nullptr);
  }
}

void RpcAgent::Impl::onPeerLost(int peer, const std::string& why) {
  if (shutDown.load()) return;
  if (leaving.load()) {
    C10D_LOG(Info, "rpc worker '", self.name, "': ", describeWorker(peer), " left (", why, ")");
  } else {
    C10D_LOG(Warning, "rpc worker '", self.name, "': lost the connection to ", describeWorker(peer),
             ": ", why);
  }
  calls.fail([peer](const Pending& p) { return p.to == peer; },
             [this, why](const Pending& p) {
               return std::make_exception_ptr(lostCallError(p.function, p.to, why));
             });
}

StateError RpcAgent::Impl::afterShutdownError(const std::string& function, int to) const {
  return StateError(c10d::detail::concat("rpc: call '", function, "' to ", describeWorker(to),
                                         " after worker '", self.name, "' shut down"));
}

RemoteError RpcAgent::Impl::lostCallError(const std::string& function, int to,
                                          const std::string& why) const {
  return RemoteError("rpc call '" + function + "' to " + describeWorker(to) +
                         " failed: the connection was lost (" + why + ")",
                     ErrorContext{.op = function, .worker = names[to]});
}

std::exception_ptr RpcAgent::Impl::timeoutError(const Pending& p) const {
  return std::make_exception_ptr(
      TimeoutError("rpc call '" + p.function + "' to " + describeWorker(p.to) +
                       " timed out after " + std::to_string(p.timeout.count()) + " ms",
                   ErrorContext{.op = p.function, .worker = names[p.to]}));
}

void RpcAgent::Impl::waitForCalls(std::chrono::steady_clock::time_point deadline,
                                  const char* what) {
  if (size_t unanswered = calls.waitForAll(deadline)) {
    C10D_THROW(TimeoutError, "rpc worker '", self.name, "': graceful shutdown: ", unanswered,
               " call(s) still unanswered ", what, " after ", options.timeout.count(), " ms");
  }
}

void RpcAgent::Impl::stopThreads() {
  // The deadline thread first: the calls it fails complete on the pool.
  calls.stopDeadlines();
  pool.stop();
}

// ---- RpcAgent ----

std::shared_ptr<RpcAgent> RpcAgent::create(std::shared_ptr<Store> store, std::string name, int rank,
                                           int worldSize, RpcOptions options,
                                           const std::function<void(RpcAgent&)>& setup) {
  C10D_CHECK(store != nullptr, InvalidArgument, "rpc: null store");
  C10D_CHECK(worldSize >= 1 && rank >= 0 && rank < worldSize, InvalidArgument, "rpc: rank ", rank,
             " out of range [0, ", worldSize, ")");
  C10D_CHECK(!name.empty(), InvalidArgument, "rpc: worker ", rank, " has an empty name");
  C10D_CHECK(options.threads >= 1, InvalidArgument, "rpc: threads must be >= 1, got ",
             options.threads);
  auto impl = std::make_shared<Impl>();
  impl->store = std::make_shared<PrefixStore>("rpc", std::move(store));
  impl->options = options;
  impl->self = WorkerInfo{name, rank};
  impl->worldSize = worldSize;
  Impl* raw = impl.get();
  impl->transport = std::make_unique<Transport>(
      rank, worldSize, auth::resolveToken(options.authToken),
      options.sharedMemory ? *options.sharedMemory : *config::Settings().flag("C10D_SHM"),
      [raw](int peer, Frame frame) { raw->onFrame(peer, std::move(frame)); },
      [raw](int peer, const std::string& why) { raw->onPeerLost(peer, why); });
  impl->pool.start(options.threads, name);
  impl->calls.startDeadlines([raw](const Impl::Pending& p) { return raw->timeoutError(p); });
  std::shared_ptr<RpcAgent> agent(new RpcAgent(impl));
  impl->agent = agent;
  impl->front = agent.get();
  registerAutogradFunctions(*agent);
  registerOptimizerFunctions(*agent);

  const auto deadline = std::chrono::steady_clock::now() + options.initTimeout;
  std::string host = options.host.empty() ? advertisedAddress(tcpStoreHost(*impl->store),
                                                              "rpc worker '" + name + "'")
                                          : options.host;
  // Every name is known before this worker listens, so that no connection (or its loss) can
  // name a worker before names holds it.
  impl->store->set(rankKey("name", rank), toBytes(name));
  std::vector<std::string> nameKeys;
  for (int r = 0; r < worldSize; ++r) nameKeys.push_back(rankKey("name", r));
  try {
    impl->store->wait(nameKeys, options.initTimeout);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < worldSize; ++r) {
      if (!impl->store->check({rankKey("name", r)})) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    C10D_THROW(TimeoutError, "rpc worker '", name, "': worker(s) ", missing,
               " did not publish themselves within ", options.initTimeout.count(), " ms");
  }
  for (int r = 0; r < worldSize; ++r) {
    impl->names.push_back(toString(impl->store->get(rankKey("name", r), options.initTimeout)));
  }
  for (int r = 0; r < worldSize; ++r) {
    auto [it, fresh] = impl->idsByName.emplace(impl->names[r], r);
    C10D_CHECK(fresh, InvalidArgument, "rpc: workers ", it->second, " and ", r, " are both named '",
               impl->names[r], "'");
  }
  impl->store->set(rankKey("address", rank), toBytes(impl->transport->listen(host)));
  // The lower id connects to the higher.
  for (int peer = rank + 1; peer < worldSize; ++peer) {
    std::string peerAddress =
        toString(impl->store->get(rankKey("address", peer), options.initTimeout));
    impl->transport->connect(peer, peerAddress, deadline);
  }
  impl->transport->waitForPeers(deadline);
  if (setup) setup(*agent);
  // Everybody's functions exist before anybody returns from create().
  if (impl->store->add("ready", 1) == worldSize) impl->store->set("ready/all", toBytes("1"));
  try {
    impl->store->wait({"ready/all"}, std::max(std::chrono::milliseconds(1),
                                              std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  deadline - std::chrono::steady_clock::now())));
  } catch (const TimeoutError&) {
    C10D_THROW(TimeoutError, "rpc worker '", name, "': not every worker finished its setup within ",
               options.initTimeout.count(), " ms");
  }
  return agent;
}

RpcAgent::RpcAgent(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

void RpcAgent::runOnPool(std::function<void()> task) {
  impl_->runOnPool(std::move(task));
}

RpcAgent::~RpcAgent() {
  shutdown(false);
}

const WorkerInfo& RpcAgent::self() const {
  return impl_->self;
}

int RpcAgent::idOf(const std::string& name) const {
  return impl_->idOf(name);
}

std::string RpcAgent::describeWorker(int id) const {
  return impl_->describeWorker(id);
}

WorkerInfo RpcAgent::workerInfo(const std::string& name) const {
  return WorkerInfo{name, impl_->idOf(name)};
}

WorkerInfo RpcAgent::workerInfo(int id) const {
  C10D_CHECK(id >= 0 && id < impl_->worldSize, InvalidArgument, "rpc: no worker with id ", id,
             " (ids 0..", impl_->worldSize - 1, ")");
  return WorkerInfo{impl_->names[id], id};
}

std::vector<WorkerInfo> RpcAgent::workers() const {
  std::vector<WorkerInfo> all;
  for (int i = 0; i < impl_->worldSize; ++i) all.push_back(WorkerInfo{impl_->names[i], i});
  return all;
}

const RpcOptions& RpcAgent::options() const {
  return impl_->options;
}

void RpcAgent::registerHandler(const std::string& name, Handler handler, Maker make) {
  addHandler(name, std::move(handler), std::move(make), false);
}

void RpcAgent::addHandler(const std::string& name, Handler handler, Maker make, bool builtin) {
  C10D_CHECK(!name.empty() && handler, InvalidArgument,
             "rpc: registerFunction needs a name and a function");
  C10D_CHECK(builtin == isAgentMessage(name), InvalidArgument, "rpc: function name '", name,
             builtin ? "' must start with '" : "' starts with '", kAgentPrefix,
             "', which the agent keeps for its own functions");
  impl_->addHandler(name, {std::move(handler), std::move(make), nullptr});
}

void RpcAgent::registerAsyncHandler(const std::string& name, AsyncHandler handler) {
  addAsyncHandler(name, std::move(handler), false);
}

void RpcAgent::addAsyncHandler(const std::string& name, AsyncHandler handler, bool builtin) {
  C10D_CHECK(!name.empty() && handler, InvalidArgument,
             "rpc: registerAsyncHandler needs a name and a function");
  C10D_CHECK(builtin == isAgentMessage(name), InvalidArgument, "rpc: function name '", name,
             builtin ? "' must start with '" : "' starts with '", kAgentPrefix,
             "', which the agent keeps for its own functions");
  impl_->addHandler(name, {nullptr, nullptr, std::move(handler)});
}

void RpcAgent::callRaw(int to, const std::string& function, Packed arguments,
                       std::chrono::milliseconds timeout, Done reply) {
  impl_->call(to, function, std::move(arguments), timeout, std::move(reply));
}

void RpcAgent::shutdown(bool graceful) {
  Impl& impl = *impl_;
  if (impl.shutDown.load()) return;
  if (graceful) {
    // A second graceful caller waits for the first and then finds the agent closed; a
    // non-graceful one does not wait (it may be what ends a graceful shutdown that is stuck).
    std::lock_guard<std::mutex> serialised(impl.shutdownMutex);
    if (impl.shutDown.load()) return;
    try {
      impl.shutdownGracefully();
    } catch (...) {
      impl.close();  // a failed graceful shutdown still leaves the agent closed
      throw;
    }
  }
  impl.close();
}

void RpcAgent::Impl::shutdownGracefully() {
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  // Our calls and references first (their replies are our peers' outstanding work), then
  // everybody's.
  waitForCalls(deadline, "before shutdown");
  settleRRefs(deadline);
  waitForCalls(deadline, "after deleting this worker's references");
  leaving = true;
  awaitEveryWorker("shutdown", "reached shutdown", deadline);
  // Worker 0 usually hosts the store (env://): it leaves last, once nobody needs the store.
  if (self.id == 0) {
    awaitEveryWorker("shutdown/done", "finished shutting down", deadline);
  } else {
    store->setString("shutdown/done/" + std::to_string(self.id), "");
    store->add("shutdown/done", 1);
  }
}

void RpcAgent::Impl::awaitEveryWorker(const std::string& stage, const char* what,
                                      std::chrono::steady_clock::time_point deadline) {
  auto key = [&](int id) { return stage + "/" + std::to_string(id); };
  store->setString(key(self.id), "");
  int64_t arrived = store->add(stage, 1);
  while (arrived < worldSize) {
    // A worker that is gone before it got here never will: say so now, not at the deadline.
    for (const auto& [peer, why] : transport->lostPeers()) {
      C10D_CHECK(store->check({key(peer)}), RemoteError, "rpc worker '", self.name,
                 "': graceful shutdown: ", describeWorker(peer), " is gone (", why, ") and never ",
                 what, "; this agent is closed without it");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string missing;
      for (int id = 0; id < worldSize; ++id) {
        if (!store->check({key(id)})) missing += (missing.empty() ? "" : ", ") + describeWorker(id);
      }
      C10D_THROW(TimeoutError, "rpc worker '", self.name, "': graceful shutdown: ", missing,
                 " not ", what, " within ", options.timeout.count(), " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    arrived = store->add(stage, 0);
  }
}

void RpcAgent::Impl::close() {
  if (shutDown.exchange(true)) return;
  transport->close();
  calls.fail([](const Pending&) { return true; },
             [this](const Pending& p) {
               return std::make_exception_ptr(
                   StateError("rpc call '" + p.function + "' to " + describeWorker(p.to) +
                              " failed: worker '" + self.name + "' shut down"));
             });
  // Replies queued for the pool still run: the pool drains its queue before it stops.
  stopThreads();
  // References to values owned here die with the agent; break the cycles they form with it.
  detail::RRefTable::Contents released = rrefs.clear();
}

}  // namespace c10d::inline v1::rpc
