#include "backends/gloo/GlooBackend.hpp"

#include <unistd.h>

#include <gloo/allgather.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>
#include <system_error>

#include "backends/common/OpQueue.hpp"
#include "backends/gloo/GlooRuntime.hpp"
#include "backends/gloo/GlooSetup.hpp"
#include "backends/gloo/algorithms/CostModel.hpp"
#include "backends/gloo/ops/Collectives.hpp"
#include "backends/gloo/p2p/PointToPoint.hpp"
#include "backends/gloo/p2p/SharedPointToPoint.hpp"
#include "backends/gloo/transport/GlooFailure.hpp"
#include "c10d/WorkPool.hpp"
#include "c10d/core/Cores.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/core/ThreadName.hpp"
#include "c10d/net/SharedMemory.hpp"
#include "store/PrefixStore.hpp"

namespace c10d::inline v1 {
namespace {

using GlooWorkPool = detail::WorkPool<GlooWork>;

// Spinning on reads saves the wake-up of a sleeping thread (tens of microseconds on virtual
// machines) but holds a core: only when the launcher tells us how many ranks share this host and
// each has a core (counted from the affinity mask and cgroup quota, not the host's), and then for
// C10D_SPIN_US before sleeping, so a rank whose peer is off its core gives the core back.
// C10D_GLOO_BUSY_POLL=0/1 overrides (1: never sleep). Says what it chose once per process.
std::chrono::nanoseconds spinBudget(const config::Settings& settings) {
  const std::chrono::nanoseconds budget =
      std::chrono::microseconds(settings.integer("C10D_SPIN_US"));
  const detail::CoreCount& cores = detail::usableCores();
  std::string why;
  std::chrono::nanoseconds chosen{0};
  if (std::optional<bool> forced = settings.flag("C10D_GLOO_BUSY_POLL")) {
    chosen = *forced ? shm::kSpinForever : std::chrono::nanoseconds{0};
    why = detail::concat("C10D_GLOO_BUSY_POLL=", *forced ? 1 : 0);
  } else {
    why = "no launcher said how many ranks share this host (LOCAL_WORLD_SIZE)";
    for (const char* variable :
         {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
      if (auto ranksHere = config::launcherInteger(variable, 1, INT32_MAX)) {
        const bool room = *ranksHere <= static_cast<int64_t>(cores.usable);
        chosen = room ? budget : std::chrono::nanoseconds{0};
        why = detail::concat(variable, "=", *ranksHere, room ? " <= " : " > ", cores.usable,
                             " usable cores (", cores.why, ")");
        break;
      }
    }
  }
  static std::atomic<int64_t> said{-1};  // the last choice logged: a change is said again
  const int64_t code = chosen == shm::kSpinForever ? INT64_MAX : chosen.count();
  if (said.exchange(code, std::memory_order_relaxed) != code) {
    C10D_LOG(Info, "waits ",
             chosen == shm::kSpinForever ? std::string("spin and never sleep")
             : chosen.count() > 0
                 ? detail::concat("spin ", chosen.count() / 1000, " us, then sleep")
                 : std::string("sleep without spinning"),
             ": ", why);
  }
  return chosen;
}

// The link as published: every rank, rank 0 included, takes the numbers from the same text, so no
// rank chooses an algorithm from digits the others rounded away (CI saw ranks choose two
// broadcasts where two costs were close).
cost::LinkCost parseLink(const std::string& text) {
  cost::LinkCost link;
  std::istringstream words(text);
  words >> link.latencyUs >> link.usPerByte;
  return link;
}

// The link the cost model prices TCP messages with, the same on every rank: what rank 0 measured
// as its sockets connected (its first TCP pair's exchange runs alone on its link;
// SyncMesh::attachSockets), or rank 0's C10D_NET_LATENCY_US and C10D_NET_MBITS where set, shared
// through the store.
cost::LinkCost agreedLink(Store& store, const SyncMesh& mesh, const BackendContext& context) {
  if (context.rank != 0) return parseLink(toString(store.multiGet({"link"}, context.timeout)[0]));
  cost::LinkCost link = mesh.measuredLink();
  std::string from = "measured by rank 0";
  if (const int64_t latency = context.settings.integer("C10D_NET_LATENCY_US"); latency > 0) {
    link.latencyUs = static_cast<double>(latency);
    from = "C10D_NET_LATENCY_US";
  }
  if (const int64_t mbits = context.settings.integer("C10D_NET_MBITS"); mbits > 0) {
    link.usPerByte = 8.0 / static_cast<double>(mbits);
    from += from.rfind("C10D", 0) == 0 ? ", C10D_NET_MBITS" : "; C10D_NET_MBITS";
  }
  const std::string published = detail::concat(link.latencyUs, " ", link.usPerByte);
  store.setString("link", published);
  link = parseLink(published);
  C10D_LOG(Info, "gloo backend of group '", context.groupName, "': across hosts ", link.latencyUs,
           " us a message and ", link.usPerByte > 0 ? 8.0 / link.usPerByte : 0.0, " Mbit/s (", from,
           "); over TCP, ", context.size, " ranks' allreduce: ",
           cost::choices<cost::AllreduceAlgorithm>(context.size, link, SyncMesh::kMaxMessageBytes),
           "; broadcast: ",
           cost::choices<cost::BroadcastAlgorithm>(context.size, link, SyncMesh::kMaxMessageBytes),
           "; allgather: ",
           cost::choices<cost::AllgatherAlgorithm>(context.size, link, SyncMesh::kMaxMessageBytes));
  return link;
}

}  // namespace

// Built into libc10d: registered as the library loads, so the core names no concrete backend.
[[maybe_unused]] const bool registered = [] {
  registerBackend(
      "gloo", [](const BackendContext& context) { return std::make_shared<GlooBackend>(context); });
  return true;
}();

// ---- Runtime ----

void GlooBackend::Runtime::checkUsable(const Work& work) {
  if (!broken_.load(std::memory_order_acquire)) return;  // every op passes here: no lock
  std::lock_guard<std::mutex> guard(mutex_);
  if (!brokenBy_.empty()) {
    C10D_THROW(BackendError, work.description(),
               ": the group's Gloo context was closed by an earlier "
               "failure (",
               brokenBy_, "); create a new process group to continue");
  }
}

namespace {

// "rank 2 of group 'g' is" or "ranks 0, 2 of group 'g' are": the peers on this host whose
// process has ended; "" if none.
std::string endedPeers(const std::vector<std::pair<int, long>>& localPeerPids,
                       const std::string& group, std::vector<int>* ranks = nullptr) {
  std::vector<int> ended;
  for (const auto& [peer, pid] : localPeerPids) {
    if (shm::processEnded(pid)) ended.push_back(peer);
  }
  if (ranks != nullptr) *ranks = ended;
  if (ended.empty()) return "";
  std::string list = ended.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ended.size(); ++i) list += detail::concat(i ? ", " : "", ended[i]);
  return detail::concat(list, " of group '", group, "'", ended.size() == 1 ? " is" : " are");
}

}  // namespace

GlooBackend::Runtime::GroupFacts GlooBackend::Runtime::exchangePeerFacts(
    Store& store, std::chrono::milliseconds timeout, bool spin, MeshAlgorithms::Hierarchy wanted,
    std::string counted, const std::vector<std::pair<std::string, std::string>>& agreed) {
  const std::string host = shm::hostIdentity();
  // The host this rank counts as (C10D_HOST_ID): it groups ranks, while pids are compared only
  // between ranks really on one host.
  if (counted.empty()) counted = host;
  for (char& c : counted) {
    if (std::isspace(static_cast<unsigned char>(c))) c = '_';
  }
  GroupFacts facts{!spin, std::vector<int>(size, 0), wanted};
  if (size == 1) return facts;
  // "<host> <counted host> <pid> <spin> <hierarchy> <agreed values...>": a few words, whatever
  // the group's size.
  std::string mine = detail::concat(host, " ", counted, " ", ::getpid(), " ", spin ? 1 : 0, " ",
                                    static_cast<int>(wanted));
  for (const auto& [name, value] : agreed) mine += " " + value;
  store.setString("facts/" + std::to_string(rank), mine);
  std::vector<std::string> keys;
  std::vector<int> peers;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    keys.push_back("facts/" + std::to_string(peer));
    peers.push_back(peer);
  }
  std::vector<Store::Bytes> values = store.multiGet(keys, timeout);
  std::vector<std::string> hosts(size);
  hosts[rank] = counted;
  for (size_t i = 0; i < peers.size(); ++i) {
    std::istringstream words(toString(values[i]));
    std::string peerHost, peerCounted;
    long pid = 0;
    int peerSpins = 0;
    int peerHierarchy = 0;
    words >> peerHost >> peerCounted >> pid >> peerSpins >> peerHierarchy;
    for (const auto& [name, value] : agreed) {
      std::string peerValue;
      words >> peerValue;
      C10D_CHECK(peerValue == value, InvalidArgument, name, " is '", value, "' on rank ", rank,
                 " but '", peerValue, "' on rank ", peers[i],
                 ": every rank must run the same algorithm; set it alike on all ranks");
    }
    facts.anySleeps = facts.anySleeps || peerSpins == 0;
    facts.hierarchy = MeshAlgorithms::agreedHierarchy(
        facts.hierarchy, static_cast<MeshAlgorithms::Hierarchy>(peerHierarchy));
    hosts[peers[i]] = peerCounted;
    if (peerHost == host && peerCounted == counted && pid > 0) {
      localPeerPids.emplace_back(peers[i], pid);
    }
  }
  // Hosts numbered in the order of their lowest rank.
  std::map<std::string, int> numbers;
  for (int r = 0; r < size; ++r) {
    facts.hostOfRank[r] = numbers.emplace(hosts[r], static_cast<int>(numbers.size())).first->second;
  }
  return facts;
}

std::string GlooBackend::Runtime::lostPeers(const std::string& glooMessage,
                                            std::vector<int>* ranks) const {
  // A peer's sockets close a moment before its process is seen to end: look for a while
  // when Gloo reports a closed or reset connection.
  const bool connectionLost = GlooFailure::of(glooMessage).connectionLost;
  const auto until =
      std::chrono::steady_clock::now() +
      (connectionLost ? std::chrono::milliseconds(500) : std::chrono::milliseconds(0));
  do {
    if (std::string ended = endedPeers(localPeerPids, group, ranks); !ended.empty()) {
      return detail::concat(" (", ended, " no longer running on this host)");
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (true);
  std::lock_guard<std::mutex> guard(addressesMutex_);
  for (const auto& [address, peer] : peerAddresses_) {
    if (glooMessage.find(address) != std::string::npos) {
      *ranks = {peer};
      return detail::concat(" (", address, " is rank ", peer, " of group '", group, "'",
                            connectionLost ? ": it was lost, or closed its connections after a "
                                             "failure of its own)"
                                           : ")");
    }
  }
  return "";
}

std::string GlooBackend::Runtime::firstLoggedFailure() {
  Store::Bytes log = failureLog->get("failures", std::chrono::seconds(1));
  return std::string(log.begin(), std::find(log.begin(), log.end(), '\n'));
}

std::string GlooBackend::Runtime::recordFailure(const std::string& message) {
  if (!failureLog) return message;
  try {  // best effort: the store may be gone with a lost rank
    failureLog->append("failures", toBytes(message + "\n"));
    return firstLoggedFailure();
  } catch (const std::exception&) {
    return message;
  }
}

const std::shared_ptr<gloo::rendezvous::Context>& GlooBackend::Runtime::context() {
  if (contextReady_.load(std::memory_order_acquire)) return context_;
  auto made = std::make_shared<GlooContext>(rank, size);
  made->setTimeout(timeout);
  GlooStore connecting(std::make_shared<PrefixStore>("main", store), timeout, rank, size);
  try {
    made->connect(connecting, device);
  } catch (const Error& e) {
    // Some ranks may have connected: the group cannot go on.
    C10D_THROW(BackendError,
               failAndBreak(detail::concat(
                   "rank ", rank, " of group '", group,
                   "' could not connect the Gloo context that Gloo's own algorithms take (every "
                   "rank connects it at the first op that takes them): ",
                   e.what())));
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) notePeerAddresses(*made, peer);
  }
  context_ = std::move(made);
  contextReady_.store(true, std::memory_order_release);
  return context_;
}

void GlooBackend::Runtime::notePeerAddresses(GlooContext& connected, int peer) {
  std::lock_guard<std::mutex> guard(addressesMutex_);
  for (const std::string& address : {connected.ownAddress(peer), connected.peerAddress(peer)}) {
    if (!address.empty()) peerAddresses_.emplace_back(address, peer);
  }
}

void GlooBackend::Runtime::closeConnections() {
  try {
    if (contextReady_.load(std::memory_order_acquire)) context_->closeConnections();
    if (mesh) {
      if (mesh->context() != nullptr) mesh->context()->closeConnections();
      mesh->closeSharedMemory();
    }
  } catch (const std::exception& e) {
    C10D_LOG(Warning, "gloo backend of group '", group, "' rank ", rank,
             ": closing connections after a failure: ", e.what());
  }
}

bool GlooBackend::Runtime::breakGroup(const std::string& message) {
  bool firstFailure;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    firstFailure = brokenBy_.empty();
    if (firstFailure) brokenBy_ = message;
    broken_.store(true, std::memory_order_release);
  }
  if (!firstFailure) return false;
  // The context is unusable from here on. Closing its connections now makes peers blocked on
  // this rank fail at once (and find this failure in the log) instead of at their timeout;
  // Gloo does not wake waits on pairs it closes itself, so those are aborted here.
  closeConnections();
  abortP2P(detail::concat("the group's connections were closed after a failure: ", message), false);
  return true;
}

std::string GlooBackend::Runtime::failAndBreak(std::string message) {
  std::string first = recordFailure(message);
  if (first != message) message += detail::concat("; the group's first failure: ", first);
  C10D_LOG(Warning, message);
  breakGroup(message);
  return message;
}

void GlooBackend::Runtime::fail(const std::string& description, const std::string& glooMessage,
                                std::optional<std::chrono::milliseconds> collective) {
  const bool timedOut = GlooFailure::of(glooMessage).timedOut;
  ErrorContext context;  // the ranks behind, or the ones lost
  std::string behind =
      timedOut && collective ? ranksBehind(current.seq, *collective, &context.peers) : "";
  std::vector<int> lost;
  std::string lostText = lostPeers(glooMessage, &lost);
  if (context.peers.empty()) context.peers = lost;
  std::string message = failAndBreak(
      detail::concat(description, " failed on rank ", rank, ": ", glooMessage, lostText, behind));
  if (timedOut) throw TimeoutError(message, std::move(context));
  throw BackendError(message, std::move(context));
}

std::string GlooBackend::Runtime::ranksBehind(uint32_t seq, std::chrono::milliseconds timeout,
                                              std::vector<int>* ranksFound) {
  if (!failureLog) return "";
  const auto window = std::clamp<std::chrono::milliseconds>(
      timeout / 4, std::chrono::milliseconds(100), std::chrono::seconds(2));
  auto key = [](int r) { return "timed_out/" + std::to_string(r); };
  std::vector<int> behind;
  try {
    failureLog->setString(key(rank), std::to_string(seq));
    const auto until = std::chrono::steady_clock::now() + window;
    do {
      behind.clear();
      for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        // Sequence numbers are the low 32 bits: compare them as distances, across wrap-around.
        bool reached =
            failureLog->check({key(r)}) &&
            static_cast<int32_t>(static_cast<uint32_t>(std::stoul(failureLog->getString(key(r)))) -
                                 seq) >= 0;
        if (!reached) behind.push_back(r);
      }
      if (behind.empty() || std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (true);
  } catch (const std::exception&) {
    return "";
  }
  *ranksFound = behind;
  std::string ranks;
  for (int r : behind) ranks += detail::concat(ranks.empty() ? "" : ", ", r);
  if (behind.empty()) {
    return detail::concat("; every rank of group '", group, "' reached this collective (seq ", seq,
                          ") and timed out in it or a later one: it hangs inside, no rank is "
                          "behind");
  }
  return detail::concat("; rank(s) ", ranks, " of group '", group,
                        "' are behind: they never reached this collective (seq ", seq,
                        "); no record of them timing out in it or a later one within ",
                        window.count(),
                        " ms of this rank, so they are busy elsewhere or no "
                        "longer calling collectives");
}

void GlooBackend::Runtime::failMismatch(const std::string& description,
                                        const std::string& mismatch) {
  // The ranks' calls differ, but the group is broken now: a BackendError like every later call's.
  C10D_THROW(BackendError,
             failAndBreak(detail::concat(description, " failed on rank ", rank, ": ", mismatch)));
}

void GlooBackend::Runtime::agree(uint32_t tag, std::chrono::milliseconds timeout,
                                 const std::vector<int64_t>* sendBytes,
                                 const std::vector<int64_t>* recvBytes) {
  detail::SigpipeGuard::mayHaveFailedWrites();  // Gloo's algorithm follows, on asynchronous pairs
  if (size == 1) return;
  WireCall mine = current;
  mine.flags |= WireCall::kAgreeing;
  // Every rank's record of `bytes` into records, whose block `rank` holds ours.
  auto gather = [&](void* records, size_t bytes) {
    if (fast) {
      mesh->setCall(mine, timeout);
      fast->allgather(records, bytes);
      return;
    }
    auto* all = static_cast<uint8_t*>(records);
    std::vector<uint8_t> ours(all + rank * bytes, all + (rank + 1) * bytes);
    gloo::AllgatherOptions options(context());
    options.setInput<uint8_t>(ours.data(), bytes);
    options.setOutput<uint8_t>(all, bytes * size);
    options.setTag(tag);
    options.setTimeout(timeout);
    gloo::allgather(options);
  };
  std::vector<WireCall> calls(size);
  calls[rank] = mine;
  gather(calls.data(), sizeof(WireCall));
  if (!std::all_of(calls.begin(), calls.end(),
                   [&](const WireCall& c) { return c.sameCall(mine); })) {
    std::map<std::string, std::string> ranksByCall;  // the same text on every rank
    for (int r = 0; r < size; ++r) {
      std::string& ranks = ranksByCall[calls[r].describe()];
      ranks += detail::concat(ranks.empty() ? "" : ", ", r);
    }
    std::string list;
    for (const auto& [call, ranks] : ranksByCall) {
      list += detail::concat(list.empty() ? "" : "; ", "rank(s) ", ranks, ": ", call);
    }
    C10D_THROW(InvalidArgument, "the ranks of group '", group,
               "' called different collectives: ", list,
               ". Nothing of it was sent, and the group is still usable");
  }
  if (sendBytes == nullptr) return;
  // Row r: the bytes rank r sends to each rank, then the bytes it expects from each.
  const size_t row = 2 * static_cast<size_t>(size);
  std::vector<int64_t> matrix(row * size);
  std::copy(sendBytes->begin(), sendBytes->end(), matrix.begin() + rank * row);
  std::copy(recvBytes->begin(), recvBytes->end(), matrix.begin() + rank * row + size);
  gather(matrix.data(), row * sizeof(int64_t));
  std::string differ;
  for (int from = 0; from < size; ++from) {
    for (int to = 0; to < size; ++to) {
      int64_t sent = matrix[from * row + to], expected = matrix[to * row + size + from];
      if (sent != expected) {
        differ += detail::concat(differ.empty() ? "" : "; ", "rank ", from, " sends ", sent,
                                 " bytes to rank ", to, ", which expects ", expected);
      }
    }
  }
  C10D_CHECK(differ.empty(), InvalidArgument, "the ranks of group '", group,
             "' disagree about the alltoall splits: ", differ,
             ". Nothing of it was sent, and the group is still usable");
}

void GlooBackend::Runtime::trackP2P(const std::shared_ptr<P2PWork>& work) {
  bool wake, wakeWatcher;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    wake = progressAsleep_;
    progressAsleep_ = false;
    wakeWatcher = watcherAsleep_;
    watcherAsleep_ = false;
    // The threads start with the group's first point-to-point op: a group used only for
    // collectives has none.
    if (!p2pStopping_ && !progress_.joinable()) startThread(&Runtime::startProgressThread);
    if (!p2pStopping_ && !watcher_.joinable()) startThread(&Runtime::startWatcher);
    lastPosted_ = std::chrono::steady_clock::now();
    p2pPending_.push_back({work, lastPosted_});
    p2pAll_.push_back(work);
    if (p2pAll_.size() > 1024) {  // forget completed ones now and then
      std::erase_if(p2pAll_, [](const std::weak_ptr<P2PWork>& w) {
        auto strong = w.lock();
        return !strong || strong->isCompleted();
      });
    }
  }
  if (wake) p2pChanged_.notify_one();
  if (wakeWatcher) watchChanged_.notify_one();
}

std::unique_ptr<gloo::transport::UnboundBuffer> GlooBackend::Runtime::acquireBuffer(void* data,
                                                                                    size_t size) {
  auto same = [&](const gloo::transport::UnboundBuffer& b) {
    return b.ptr == data && b.size == size;
  };
  if (auto buffer = idleBuffers_.take(same)) return buffer;
  return context()->createUnboundBuffer(data, size);
}

void GlooBackend::Runtime::releaseBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> buffer) {
  idleBuffers_.give(std::move(buffer));
}

std::unique_ptr<GlooBackend::Runtime::Staging> GlooBackend::Runtime::acquireStaging(size_t size) {
  if (auto staging = idleStaging_.take([&](const Staging& s) { return s.size == size; })) {
    return staging;
  }
  auto staging = std::make_unique<Staging>();
  staging->bytes = std::make_unique<uint8_t[]>(size);
  staging->size = size;
  staging->buffer = context()->createUnboundBuffer(staging->bytes.get(), size);
  return staging;
}

void GlooBackend::Runtime::releaseStaging(std::unique_ptr<Staging> staging) {
  idleStaging_.give(std::move(staging));
}

void GlooBackend::Runtime::startThread(void (Runtime::*start)()) {
  try {
    (this->*start)();
  } catch (const std::system_error& e) {
    // Ops still complete when waited for; only the ones nobody waits for, and the watch for
    // lost peers, go without.
    C10D_LOG(Warning, "gloo backend of group '", group, "' rank ", rank,
             ": cannot start a point-to-point thread: ", e.what());
  }
}

void GlooBackend::Runtime::startProgressThread() {
  progress_ = std::thread([this] {
    detail::nameThisThread("c10d-gloo-p2p");
    onProgressThread() = true;
    detail::blockSigpipeInThisThread();
    std::unique_lock<std::mutex> lock(mutex_);
    while (!p2pStopping_) {
      auto now = std::chrono::steady_clock::now();
      if (!p2pPending_.empty() && p2pPending_.front().posted + kP2PClaimDelay <= now) {
        std::shared_ptr<P2PWork> work = p2pPending_.front().work.lock();
        p2pPending_.pop_front();
        if (!work || work->isCompleted()) continue;
        lock.unlock();
        work->completeIfUnclaimed();
        work.reset();
        lock.lock();
        continue;
      }
      if (p2pPending_.empty() && now - lastPosted_ >= kP2PIdleAfter) {
        progressAsleep_ = true;
        p2pChanged_.wait(lock, [&] { return p2pStopping_ || !p2pPending_.empty(); });
        progressAsleep_ = false;
        continue;
      }
      // One look per kP2PClaimDelay, not one per op's due time.
      p2pChanged_.wait_until(lock, now + kP2PClaimDelay, [&] { return p2pStopping_; });
    }
  });
}

std::string GlooBackend::Runtime::lookForLoss() {
  // The log first: a peer that failed (and named the rank it lost) may have exited since.
  std::string storeError;
  try {
    if (failureLog && failureLog->check({"failures"})) {
      return "the group's first failure: " + firstLoggedFailure();
    }
  } catch (const std::exception& e) {
    storeError = e.what();
  }
  std::string seen;
  if (std::string ended = endedPeers(localPeerPids, group); !ended.empty()) {
    seen = detail::concat(
        "rank ", rank, " of group '", group, "': ", ended, " no longer running on this host",
        storeError.empty() ? "" : "; the group's store is unreachable too: ", storeError);
  } else if (!storeError.empty()) {
    seen = detail::concat("rank ", rank, " of group '", group,
                          "' lost the group's store while point-to-point operations were "
                          "outstanding: ",
                          storeError);
  }
  return seen.empty() ? "" : recordFailure(seen);
}

void GlooBackend::Runtime::startWatcher() {
  watcherStarted_.store(true, std::memory_order_release);
  if (size == 1) return;
  watcher_ = std::thread([this] {
    detail::nameThisThread("c10d-gloo-watch");
    detail::blockSigpipeInThisThread();
    std::unique_lock<std::mutex> lock(mutex_);
    // Looks with nothing outstanding before it parks until an op wakes it.
    constexpr int kIdleLooks = 10;
    int idle = 0;
    while (!p2pStopping_ && !broken_.load()) {
      bool outstanding = std::any_of(p2pAll_.begin(), p2pAll_.end(), [](const auto& weak) {
        auto work = weak.lock();
        return work && !work->isCompleted();
      });
      outstanding = outstanding || (sharedP2p && sharedP2p->outstanding());
      idle = outstanding ? 0 : idle + 1;
      if (idle > kIdleLooks) {
        watcherAsleep_ = true;
        watcherParked_.store(true, std::memory_order_seq_cst);
        // An op of the shared-memory engine posted meanwhile did not see the flag.
        if (!(sharedP2p && sharedP2p->outstanding())) {
          watchChanged_.wait(lock, [&] { return p2pStopping_ || !watcherAsleep_; });
        }
        watcherParked_.store(false, std::memory_order_relaxed);
        watcherAsleep_ = false;
        idle = 0;
        continue;
      }
      if (watchChanged_.wait_for(lock, kWatchInterval, [&] { return p2pStopping_; })) break;
      if (!outstanding) continue;
      lock.unlock();
      std::string loss = lookForLoss();
      if (!loss.empty()) {
        C10D_LOG(Warning, "gloo backend of group '", group, "' rank ", rank,
                 ": failing outstanding point-to-point operations: ", loss);
        breakGroup(loss);
      }
      lock.lock();
    }
  });
}

void GlooBackend::Runtime::wakeWatcher() {
  if (!watcherStarted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!p2pStopping_ && !watcher_.joinable()) startThread(&Runtime::startWatcher);
    return;
  }
  if (!watcherParked_.load(std::memory_order_seq_cst)) return;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    watcherAsleep_ = false;
  }
  watchChanged_.notify_one();
}

void GlooBackend::Runtime::abortP2P(const std::string& reason, bool shutDown) {
  std::vector<std::shared_ptr<P2PWork>> outstanding;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto& weak : p2pAll_) {
      if (auto work = weak.lock()) outstanding.push_back(work);
    }
  }
  for (auto& work : outstanding) work->abortWait(reason, shutDown);
  if (sharedP2p) sharedP2p->abortAll(reason, shutDown);
}

void GlooBackend::Runtime::stopP2P() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    p2pStopping_ = true;
  }
  p2pChanged_.notify_all();
  watchChanged_.notify_all();
  abortP2P("aborted because the process group shut down", true);
  if (p2p) p2p->stop();
  if (sharedP2p) sharedP2p->stop();
  if (progress_.joinable()) progress_.join();
  if (watcher_.joinable()) watcher_.join();
}

// ---- GlooBackend ----

namespace {

// One Gloo device per process and local address, shared by every group: its loop thread serves
// all their pairs (a device per group was a thread per group). A child of fork() makes its own,
// as the parent's loop thread is not in it.
std::shared_ptr<gloo::transport::Device> sharedDevice(const gloo::transport::tcp::attr& attr) {
  struct Devices {
    std::mutex mutex;
    pid_t pid = 0;
    std::map<std::string, std::weak_ptr<gloo::transport::Device>> byAddress;
  };
  static auto* devices = new Devices;  // never destroyed: groups may outlive static destructors
  const std::string key = detail::concat(attr.iface, "|", attr.hostname, "|", attr.ai_family);
  std::lock_guard<std::mutex> guard(devices->mutex);
  if (devices->pid != ::getpid()) {
    devices->byAddress.clear();
    devices->pid = ::getpid();
  }
  std::weak_ptr<gloo::transport::Device>& known = devices->byAddress[key];
  std::shared_ptr<gloo::transport::Device> device = known.lock();
  if (!device) {
    device = gloo::transport::tcp::CreateDevice(attr);
    known = device;
  }
  return device;
}

}  // namespace

GlooBackend::GlooBackend(const BackendContext& context)
    : QueuedBackend("gloo", context),
      runtime_(std::make_shared<Runtime>()),
      pool_(std::make_shared<GlooWorkPool>()) {
  runtime_->rank = context.rank;
  runtime_->size = context.size;
  runtime_->group = context.groupName;
  gloo::transport::tcp::attr attr = deviceAttributes(*context.store, context.settings);
  // Set-up writes to peers too (the SyncMesh's first exchange), and the device's loop thread,
  // which writes to every pair in asynchronous mode, inherits this thread's mask: SIGPIPE stays
  // blocked there for good.
  detail::SigpipeGuard quiet;
  try {
    runtime_->device = sharedDevice(attr);
    runtime_->store = context.store;
    runtime_->timeout = context.timeout;
    // C10D_GLOO_FAST_PATH: 0 never, all for every size, size by size (same on every rank).
    const std::string fastPath = context.settings.value("C10D_GLOO_FAST_PATH");
    const std::chrono::nanoseconds spinFor = spinBudget(context.settings);
    const bool spin = spinFor.count() > 0;
    PrefixStore peerStore("peers", context.store);
    const std::string hierarchy = context.settings.value("C10D_GLOO_HIERARCHICAL");
    const Runtime::GroupFacts facts = runtime_->exchangePeerFacts(
        peerStore, context.timeout, spin,
        hierarchy == "0"   ? MeshAlgorithms::Hierarchy::Off
        : hierarchy == "1" ? MeshAlgorithms::Hierarchy::On
                           : MeshAlgorithms::Hierarchy::Auto,
        context.settings.value("C10D_HOST_ID"),
        {{"C10D_ALLREDUCE_ALGO", context.settings.value("C10D_ALLREDUCE_ALGO")},
         {"C10D_BROADCAST_ALGO", context.settings.value("C10D_BROADCAST_ALGO")},
         {"C10D_ALLGATHER_ALGO", context.settings.value("C10D_ALLGATHER_ALGO")}});
    if (context.size > 1 && fastPath != "0") {
      runtime_->mesh =
          std::make_unique<SyncMesh>(context.rank, context.size, context.timeout, spinFor);
      runtime_->fast = std::make_unique<MeshAlgorithms>(*runtime_->mesh);
      const bool shm = context.settings.flag("C10D_SHM").value_or(true);
      std::string chosen =
          runtime_->mesh->connectSharedMemory(peerStore, runtime_->localPeerPids, shm);
      C10D_LOG(Info, "gloo backend of group '", context.groupName, "' rank ", context.rank, ": ",
               chosen);
      // Sockets only for the pairs that shared memory does not carry (none on one host).
      if (runtime_->mesh->needsSockets()) {
        auto sockets = std::make_shared<GlooContext>(context.rank, context.size);
        sockets->setTimeout(context.timeout);
        GlooStore fastStore(std::make_shared<PrefixStore>("fast", context.store), context.timeout,
                            context.rank, context.size);
        sockets->connect(fastStore, runtime_->device);
        std::vector<std::string> addresses(context.size);
        for (int peer = 0; peer < context.size; ++peer) {
          if (peer == context.rank) continue;
          addresses[peer] = sockets->peerAddress(peer);
          runtime_->notePeerAddresses(*sockets, peer);
        }
        runtime_->mesh->attachSockets(sockets, addresses);
        runtime_->fast->setLink(agreedLink(peerStore, *runtime_->mesh, context));
      }
      runtime_->fast->force({cost::algorithmNamed<cost::AllreduceAlgorithm>(
                                 context.settings.value("C10D_ALLREDUCE_ALGO")),
                             cost::algorithmNamed<cost::BroadcastAlgorithm>(
                                 context.settings.value("C10D_BROADCAST_ALGO")),
                             cost::algorithmNamed<cost::AllgatherAlgorithm>(
                                 context.settings.value("C10D_ALLGATHER_ALGO"))});
      if (std::string layout = runtime_->fast->setHosts(facts.hostOfRank, facts.hierarchy);
          !layout.empty()) {
        C10D_LOG(Info, "gloo backend of group '", context.groupName, "' rank ", context.rank, ": ",
                 layout);
      }
    }
    // Gloo's own algorithms and point-to-point over TCP take a context of their own. Where
    // shared memory carries every pair both ways, only Gloo's algorithms need it (gather,
    // scatter, uneven alltoall), and ranks connect it together, at the first op that does
    // (Runtime::context).
    if (!(runtime_->mesh && !runtime_->mesh->needsSockets() && runtime_->mesh->pullsEverywhere())) {
      runtime_->context();
    }
    runtime_->largeViaGloo = runtime_->fast && fastPath != "all" && facts.anySleeps;
    runtime_->failureLog = std::make_shared<PrefixStore>("errors", context.store);
  } catch (const gloo::Exception& e) {
    C10D_THROW(BackendError, "gloo backend of group '", context.groupName, "': rank ", context.rank,
               " of ", context.size, " could not connect to its peers (address ",
               attr.hostname.empty() ? attr.iface : attr.hostname, "): ", e.what());
  } catch (const gloo::EnforceNotMet& e) {
    C10D_THROW(BackendError, "gloo backend of group '", context.groupName, "': rank ", context.rank,
               " of ", context.size, " could not set up Gloo: ", e.what());
  }
  startQueue();
  if (context.size > 1) runtime_->p2p = std::make_shared<P2PEngine>(*runtime_);
  if (runtime_->mesh && runtime_->mesh->pullsEverywhere()) {
    runtime_->sharedP2p = std::make_shared<SharedP2P>(*runtime_, *runtime_->mesh);
  }
}

GlooBackend::~GlooBackend() {
  shutdown();
  pool_->close();
}

void GlooBackend::stopAfterQueue() {
  runtime_->stopP2P();
}

std::shared_ptr<QueuedWork> GlooBackend::makeCollective(const Op& op, const OpTensors& tensors) {
  std::shared_ptr<GlooWork> work =
      GlooWorkPool::acquire(pool_, op, [&] { return new GlooWork(trace(), runtime_.get()); });
  work->capture(tensors);
  return work;
}

namespace {

// Each collective's function, by OpType.
constexpr void (*kRun[])(GlooBackend::Runtime&, const Op&, const OpTensors&) = {
    gloo_ops::broadcast,
    gloo_ops::allreduce,
    gloo_ops::allreduceCoalesced,
    gloo_ops::reduce,
    gloo_ops::allgather,
    gloo_ops::allgatherIntoTensor,
    gloo_ops::gather,
    gloo_ops::scatter,
    gloo_ops::reduceScatter,
    gloo_ops::reduceScatterTensor,
    gloo_ops::alltoall,
    gloo_ops::alltoallBase,
    gloo_ops::barrier,
};
static_assert(std::size(kRun) == static_cast<size_t>(OpType::Barrier) + 1);

}  // namespace

void GlooWork::run() {
  const Op& call = op();
  // The sequence number is the Gloo tag, and what this rank's messages say it runs.
  struct Release {
    GlooBackend::Runtime& runtime;
    ~Release() { runtime.releaseScratch(); }
  } release{*runtime_};
  runtime_->guarded(
      *this,
      [&] {
        runtime_->beginCall(WireCall::of(call), call.timeout);
        kRun[static_cast<size_t>(call.type)](*runtime_, call, tensors());
      },
      call.timeout);
}

std::shared_ptr<Work> GlooBackend::startP2P(const Op& op, const Tensor& tensor) {
  const bool isSend = op.type == OpType::Send;
  checkNotShutDown(op);
  C10D_CHECK(runtime_->p2p != nullptr, InvalidArgument, describe(op), " (group '", groupName(),
             "'): a group of one has no peer to exchange with");
  if (runtime_->sharedP2p) return runtime_->sharedP2p->start(op, tensor, trace(), runtime_);
  std::shared_ptr<P2PWork> work;
  P2PEngine& engine = *runtime_->p2p;
  if (isSend) {
    auto send = std::make_shared<P2PSend>(op, trace(), tensor, runtime_);
    runtime_->guarded(*send, [&] {
      engine.ensureStarted();
      send->post(engine.nextId());
    });
    work = send;
  } else {
    auto recv = std::make_shared<P2PRecv>(op, trace(), tensor, runtime_);
    runtime_->checkUsable(*recv);
    // Posting a receive calls into Gloo only the first time (the head receives).
    if (!engine.started()) runtime_->guarded(*recv, [&] { engine.ensureStarted(); });
    engine.post(recv, op.peer, op.tag);
    work = recv;
  }
  runtime_->trackP2P(work);
  return work;
}

}  // namespace c10d::inline v1
