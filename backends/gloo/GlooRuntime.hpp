#pragma once

// Private to backends/gloo: the Gloo context of a group, how Gloo's failures become c10d
// errors, and the tag/slot scheme. Includes Gloo headers, so it is never installed.

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/gloo/GlooBackend.hpp"
#include "backends/gloo/GlooSetup.hpp"
#include "backends/gloo/algorithms/MeshAlgorithms.hpp"
#include "backends/gloo/transport/SyncMesh.hpp"
#include "backends/gloo/transport/WireCall.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

class P2PWork;
class P2PEngine;
class SharedP2P;

// Objects that are costly to make and kept for reuse, up to kMaxIdle of them (the oldest goes
// first). Thread-safe.
template <typename T>
class IdlePool {
 public:
  static constexpr size_t kMaxIdle = 64;

  // An idle object for which match(object) holds, or null.
  template <typename Match>
  std::unique_ptr<T> take(Match&& match) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = std::find_if(idle_.begin(), idle_.end(), [&](const auto& o) { return match(*o); });
    if (it == idle_.end()) return nullptr;
    std::unique_ptr<T> object = std::move(*it);
    idle_.erase(it);
    return object;
  }
  void give(std::unique_ptr<T> object) {
    std::unique_ptr<T> evicted;  // destroyed after the lock is released
    std::lock_guard<std::mutex> guard(mutex_);
    idle_.push_back(std::move(object));
    if (idle_.size() > kMaxIdle) {
      evicted = std::move(idle_.front());
      idle_.pop_front();
    }
  }

 private:
  std::mutex mutex_;
  std::deque<std::unique_ptr<T>> idle_;
};

// Shared by the backend and its point-to-point Works, which may outlive the backend.
struct GlooBackend::Runtime {
  int rank = 0;
  int size = 1;
  std::string group;
  std::shared_ptr<gloo::transport::Device> device;  // the process's (shared by its groups)
  std::shared_ptr<Store> store;                     // the group's
  std::chrono::milliseconds timeout{0};             // the group's
  // The context of Gloo's own algorithms and of point-to-point over TCP, connected at set-up, or
  // (where shared memory carries every pair) by the first op that takes Gloo's algorithms: every
  // rank of the group reaches it in the same order. Call it only on the thread that runs the
  // group's collectives, or once set-up connected it. Throws BackendError when a rank does not
  // come to connect it within the group's timeout.
  const std::shared_ptr<gloo::rendezvous::Context>& context();
  // The collectives' own transport between every pair (transport/SyncMesh.hpp), and the
  // algorithms over it (algorithms/MeshAlgorithms.hpp): the path small messages take, and every
  // size where shared memory carries every pair. Null for a group of one, or C10D_GLOO_FAST_PATH=0.
  std::unique_ptr<SyncMesh> mesh;
  std::unique_ptr<MeshAlgorithms> fast;

  // Messages from this size on go to Gloo's own algorithms when any rank of the group sleeps in
  // its reads (more ranks than cores on its host): there, many 256 KiB pieces each paying a
  // wake-up lost to Gloo's asynchronous transfers (docs/performance.md). Agreed by all ranks
  // at construction, since every rank must take the same path.
  static constexpr size_t kLargeBytes = 2 * 1024 * 1024;
  bool largeViaGloo = false;

  // The mesh's algorithms, or null when an op must take Gloo's own algorithms: a group of one, a
  // large message where largeViaGloo, or one over an op's own limit. bytes: the op's whole
  // buffer. The size rules are about sockets: a group whose every pair is on shared memory keeps
  // every size on the mesh, which beats Gloo's algorithms there at every size measured
  // (docs/performance.md, "Same-host shared memory against TCP"). An op's own timeout does not
  // choose: the mesh keeps it (SyncMesh::setCall).
  MeshAlgorithms* fastPath(size_t bytes, size_t limit = SIZE_MAX) const {
    if (!fast) return nullptr;
    if (mesh->allShared()) return fast.get();
    if (bytes > limit) return nullptr;
    return largeViaGloo && bytes >= kLargeBytes ? nullptr : fast.get();
  }

  // Throws BackendError naming work when an earlier failure closed the context.
  void checkUsable(const Work& work);

  // Memory for one collective to pack its tensors in (collectives run one at a time): kept
  // between ops up to kKeptScratch bytes, so that a small op allocates nothing; a larger buffer
  // is released when the op ends (releaseScratch).
  static constexpr size_t kKeptScratch = 1 << 20;
  uint8_t* scratch(size_t bytes) {
    if (bytes <= kKeptScratch) {
      if (scratch_.size() < bytes) scratch_.resize(kKeptScratch);
      return scratch_.data();
    }
    largeScratch_ = Tensor::empty({static_cast<int64_t>(bytes)}, ScalarType::UInt8);
    return static_cast<uint8_t*>(largeScratch_.data());
  }
  void releaseScratch() {
    if (largeScratch_.defined()) largeScratch_ = Tensor();
  }

  // Runs fn (which calls Gloo) and turns Gloo's exceptions into TimeoutError / BackendError
  // whose message names the operation; the first failure marks the context unusable. SIGPIPE is
  // blocked meanwhile, so a write to a lost peer's socket fails instead of killing the process.
  // collective: the op's timeout when fn runs a collective (a timeout then says who is behind).
  template <typename Fn>
  void guarded(const Work& work, Fn&& fn,
               std::optional<std::chrono::milliseconds> collective = std::nullopt) {
    checkUsable(work);
    // A collective arms the guard before its first socket write (SyncMesh, agree()): one that
    // stays in shared memory makes no system call for it.
    detail::SigpipeGuard quiet(collective ? detail::SigpipeGuard::kWhenWriting
                                          : detail::SigpipeGuard::kNow);
    try {
      fn();
    } catch (const gloo::Exception& e) {
      fail(work.description(), e.what(), collective);
    } catch (const gloo::EnforceNotMet& e) {
      fail(work.description(), e.what(), collective);
    } catch (const WireMismatch& e) {
      failMismatch(work.description(), e.message);
    }
  }
  [[noreturn]] void fail(const std::string& description, const std::string& glooMessage,
                         std::optional<std::chrono::milliseconds> collective = std::nullopt);
  // After this rank timed out in collective seq (the current call): records that in the
  // group's store, waits a while for the other ranks' records, and names the ranks with none at
  // or past seq: they never reached it. The wait is a quarter of the op's timeout, within
  // [100 ms, 2 s]: ranks that are all stuck in the collective time out within that of each
  // other. Runs before the group is broken, whose closed connections would end the others'
  // waits with another error. Best effort: "" when the store cannot tell. ranks gets them.
  std::string ranksBehind(uint32_t seq, std::chrono::milliseconds timeout, std::vector<int>* ranks);
  // A message contradicted this rank's call: BackendError, and the group is broken.
  [[noreturn]] void failMismatch(const std::string& description, const std::string& mismatch);

  // The collective this rank runs now (ops run one at a time), as its messages state it.
  WireCall current;
  void beginCall(const WireCall& call, std::chrono::milliseconds timeout) {
    current = call;
    if (mesh) mesh->setCall(call, timeout);
  }
  // Before Gloo's own algorithm: every rank's call is gathered and compared (and for alltoallv
  // the bytes each pair will exchange), over the SyncMesh (or, where C10D_GLOO_FAST_PATH=0 made
  // none, over Gloo with a fixed size). Calls that differ throw InvalidArgument on every rank
  // alike, naming each rank's call, and the group stays usable: Gloo's algorithm never sees them
  // (its checks abort the process from its device thread). Costs one small allgather, on paths
  // whose ops take far longer (large messages, gather, scatter, uneven alltoall).
  void agree(uint32_t tag, std::chrono::milliseconds timeout,
             const std::vector<int64_t>* sendBytes = nullptr,
             const std::vector<int64_t>* recvBytes = nullptr);
  // Marks the context unusable with message (the first failure wins), closes its connections
  // and fails every outstanding point-to-point Work with it. Returns whether this was the
  // first failure.
  bool breakGroup(const std::string& message);
  // Records this rank's failure in the group's log, logs it, breaks the group, and returns the
  // message with the group's first failure appended when that was another.
  std::string failAndBreak(std::string message);

  // At set-up every rank publishes in one store key what the others need to know of it: its
  // host and pid (a peer on this host whose process ended is lost for certain), whether it
  // spins on fast-path reads, its C10D_GLOO_HIERARCHICAL (wanted) and the host it
  // counts as (C10D_HOST_ID, counted; empty: its own). What every rank then knows alike:
  struct GroupFacts {
    bool anySleeps;                       // some rank of the group sleeps in its reads
    std::vector<int> hostOfRank;          // numbered in the order of their lowest rank
    MeshAlgorithms::Hierarchy hierarchy;  // what the ranks agree on (agreedHierarchy)
  };
  // agreed: settings (name, this rank's value, one word) that must be every rank's, such as the
  // forced algorithms (throws InvalidArgument naming the setting and a rank whose value differs).
  GroupFacts exchangePeerFacts(Store& store, std::chrono::milliseconds timeout, bool spin,
                               MeshAlgorithms::Hierarchy wanted, std::string counted,
                               const std::vector<std::pair<std::string, std::string>>& agreed);
  std::vector<std::pair<int, long>> localPeerPids;  // (rank, pid)
  // Notes the listening addresses of connected's pairs between this rank and peer, by which
  // Gloo's errors name it.
  void notePeerAddresses(GlooContext& connected, int peer);
  // " (rank 2 of group 'g' is no longer running on this host)", or an address match, or "";
  // ranks gets the ranks it names.
  std::string lostPeers(const std::string& glooMessage, std::vector<int>* ranks) const;
  // Where a failing rank appends its failure before its connections close: a rank that then
  // sees a peer vanish, or times out waiting for one, reports the group's first failure too
  // (the rank that was killed, not the survivor that exited after it).
  std::shared_ptr<Store> failureLog;
  // Appends message to failureLog and returns the log's first entry (message when none).
  std::string recordFailure(const std::string& message);
  std::string firstLoggedFailure();  // throws when the store cannot be read
  // Closes every pair of both contexts; fail() calls it on this rank's first failure only.
  void closeConnections();

  // Point-to-point operations whose Work nobody has waited for yet: the progress thread waits
  // for them in order, so their Work completes even if the caller never waits. It leaves each
  // alone for kP2PClaimDelay first: a caller that waits soon waits on Gloo itself, without a
  // thread hand-off.
  static constexpr std::chrono::milliseconds kP2PClaimDelay{2};
  // While point-to-point traffic goes on, the progress thread looks at the queue once per
  // kP2PClaimDelay, not once per op (a wake-up per op cost a context switch and contention on
  // mutex_ in every small send/recv); after kP2PIdleAfter without an op it sleeps until woken.
  static constexpr std::chrono::milliseconds kP2PIdleAfter{200};
  void trackP2P(const std::shared_ptr<P2PWork>& work);

  // Unbound buffers for point-to-point ops. Creating and destroying one per op was a large part
  // of a small send/recv's time (they register with the context, which the device thread also
  // locks; docs/performance-history.md, "Figures that lived in code comments"), so buffers whose
  // op completed are kept for the same memory.
  std::unique_ptr<gloo::transport::UnboundBuffer> acquireBuffer(void* data, size_t size);
  void releaseBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> buffer);
  // Memory of our own with its buffer, for the heads and verdicts of point-to-point messages
  // (PointToPoint.hpp); kept like the buffers.
  struct Staging {
    std::unique_ptr<uint8_t[]> bytes;
    size_t size = 0;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  std::unique_ptr<Staging> acquireStaging(size_t size);
  void releaseStaging(std::unique_ptr<Staging> staging);
  // Matches point-to-point messages with receives (PointToPoint.hpp); null for a group of one.
  std::shared_ptr<P2PEngine> p2p;
  // Point-to-point over shared memory instead (SharedPointToPoint.hpp), where the whole group
  // can take it (SyncMesh::pullsEverywhere); else null.
  std::shared_ptr<SharedP2P> sharedP2p;
  // Starts the progress thread; mutex_ held, from the group's first point-to-point op.
  void startProgressThread();
  // Calls start (startProgressThread or startWatcher), logging instead of throwing when the
  // system refuses the thread: it runs where an op is posted (under the shared-memory engine's
  // token, which an exception would never release).
  void startThread(void (Runtime::*start)());
  // True on the progress thread, which claims ops nobody waits for: it must not spin on them.
  static bool& onProgressThread() {
    thread_local bool on = false;
    return on;
  }
  void stopP2P();  // aborts outstanding point-to-point waits and joins the threads

  // A point-to-point wait on a lost peer is not always woken by Gloo: a receive from any source
  // waits in the context, not on a pair, and a send or receive on a pair that this rank closed
  // itself (after a failure elsewhere) is never signalled. While point-to-point Works are
  // outstanding, the watcher looks every kWatchInterval for a peer on this host whose process
  // ended and for a failure another rank recorded in the group's log, and breaks the group
  // with it, so such waits fail within about this interval instead of at their timeout.
  static constexpr std::chrono::milliseconds kWatchInterval{500};
  // Starts the watcher; mutex_ held, from the group's first point-to-point op.
  void startWatcher();
  // Wakes a watcher parked for want of outstanding ops, or starts it: the shared-memory engine
  // posted one.
  void wakeWatcher();
  // The group's first failure as another rank logged it, else what this rank finds itself (a
  // peer on this host ended, the store unreachable), recorded in the log; "" when neither.
  std::string lookForLoss();

 private:
  std::vector<uint8_t> scratch_;
  Tensor largeScratch_;
  std::shared_ptr<gloo::rendezvous::Context> context_;  // see context()
  std::atomic<bool> contextReady_{false};
  mutable std::mutex addressesMutex_;
  std::vector<std::pair<std::string, int>> peerAddresses_;  // (address, rank)
  std::mutex mutex_;
  std::string brokenBy_;  // the first failure's message; empty while healthy
  std::atomic<bool> broken_{false};
  std::condition_variable p2pChanged_;
  struct PendingP2P {
    std::weak_ptr<P2PWork> work;
    std::chrono::steady_clock::time_point posted;
  };
  std::deque<PendingP2P> p2pPending_;
  std::vector<std::weak_ptr<P2PWork>> p2pAll_;
  bool p2pStopping_ = false;
  bool progressAsleep_ = false;  // in an untimed wait: the next op must wake it
  std::chrono::steady_clock::time_point lastPosted_;
  std::thread progress_;
  std::thread watcher_;
  std::condition_variable watchChanged_;
  bool watcherAsleep_ = false;  // no outstanding point-to-point Work: the next op must wake it
  std::atomic<bool> watcherParked_{false};   // watcherAsleep_, for lock-free posters to read
  std::atomic<bool> watcherStarted_{false};  // watcher_ made (or a group of one: never)
  void abortP2P(const std::string& reason, bool shutDown);
  IdlePool<gloo::transport::UnboundBuffer> idleBuffers_;
  IdlePool<Staging> idleStaging_;
};

// Bytes of a tensor's memory, for operations that only move data.
inline uint8_t* bytesOf(const Tensor& tensor) {
  return static_cast<uint8_t*>(tensor.data());
}

}  // namespace c10d::inline v1
