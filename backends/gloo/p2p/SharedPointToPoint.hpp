#pragma once

// Private to backends/gloo: send and recv when the whole group shares one host's memory and every
// rank can read every other's (SyncMesh::pullsEverywhere); elsewhere PointToPoint.hpp's path over
// Gloo. Messages go on the SyncMesh's point-to-point channels, one each way per pair (apart from
// the collectives' channels, since they come in any order):
//
//   head     sender -> receiver: size, tag and the sender's message id; the payload itself when
//            it is at most kEagerBytes, else its address in the sender, from which the receiver
//            copies it straight into its tensor (process_vm_readv) once it matched the head:
//            by the receive's own wait, or by any thread making progress when nobody runs it
//   verdict  receiver -> sender once the payload is in: the size the receive takes and whether
//            the two were equal; the send completes on it
//
// Heads match receives as in PointToPoint.hpp (source and tag, in posting order, any source
// allowed), with the same errors for sizes that differ.
//
// A blocking send or receive (issued, then waited for) takes no lock and allocates nothing: its
// Work is one of the engine's pooled ones, and the engine's state (channels, matching, the ops in
// flight) belongs to whichever thread holds its progress token, a flag taken with one
// compare-and-swap. A thread that finds the token taken does not wait for it: a new op goes into
// the engine's inbox (a lock-free stack) for the holder to take in before it lets the token go,
// and a waiter spins, then sleeps on a futex word the holder bumps as ops move on. Whoever waits
// for an op makes progress itself, polling every channel, so a small send/recv pays no thread
// hand-off; while nobody does, a listener thread (c10d-gloo-shm) makes it, asleep on the rank's
// doorbell until a peer writes, and completes the ops nobody waits for. Every channel is drained
// as it is read (a head no receive was posted for yet is kept, with its payload, in memory the
// engine keeps for the next), and a message that finds no room waits in a queue for a later
// poll, so two ranks writing to each other never wait on each other.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/gloo/p2p/PointToPoint.hpp"
#include "backends/gloo/transport/SyncMesh.hpp"

namespace c10d::inline v1 {

namespace detail {
template <typename T>
class WorkPool;
}  // namespace detail

struct SharedFrame {
  // Payloads up to this travel in the head: two copies through the channel, no system call.
  // Larger ones are read from the sender's memory: one copy, one system call, slower at every
  // size measured (docs/performance-history.md, "Figures that lived in code comments"). As large
  // as the channel allows with four heads in flight.
  static constexpr size_t kEagerBytes = 60 * 1024;
  static_assert(kEagerBytes + shm::Channel::kSlotBytes <= SyncMesh::kP2PChannelBytes / 4);
  enum Kind : uint32_t { kHead = 1, kVerdict = 2 };
  struct Message {
    uint32_t kind;
    uint32_t matched;  // verdict: 1 when the sizes were equal
    uint64_t bytes;    // head: the payload's; verdict: what the receive takes
    uint64_t id;       // the sender's message number
    int64_t tag;       // head
    uint64_t address;  // head above kEagerBytes: where the payload is in the sender
  };
  static_assert(sizeof(Message) <= shm::Channel::kSlotBytes);
  static size_t eagerBytes(uint64_t bytes) { return bytes <= kEagerBytes ? bytes : 0; }
};

class SharedP2P;

// A send or receive over shared memory, pooled by its engine (made once, rebound to each op).
// Between its post and its completion the engine holds it (self_): a caller may drop its Work.
class SharedWork : public P2PWork {
 public:
  SharedWork(std::shared_ptr<detail::GroupTrace> trace,
             std::shared_ptr<GlooBackend::Runtime> runtime, SharedP2P& engine)
      : P2PWork(std::move(trace), std::move(runtime)), engine_(engine) {}

 protected:
  friend class SharedP2P;
  template <typename T>
  friend class detail::WorkPool;
  void aborting(bool claimedHere) override;
  void rebind(const Op& op) override;
  // The engine's, under its token: the list this op is in (its inbox, the posted receives, the
  // unanswered sends, the receives to copy, the ops done but not yet completed).
  SharedP2P& engine_;
  SharedWork* next_ = nullptr;
  std::shared_ptr<SharedWork> self_;
  std::atomic<bool> aborted_{false};
  // Set (release) by the token's holder when the op's outcome is known: the send answered, the
  // receive's payload in.
  std::atomic<bool> determined_{false};
};

class SharedSend : public SharedWork {
 public:
  using SharedWork::SharedWork;

 private:
  friend class SharedP2P;
  void run(Clock::time_point deadline) override;
  SharedFrame::Message answer_{};  // the receiver's verdict (written before determined_)
};

class SharedRecv : public SharedWork {
 public:
  using SharedWork::SharedWork;

 private:
  friend class SharedP2P;
  template <typename T>
  friend class detail::WorkPool;
  void run(Clock::time_point deadline) override;
  void aborting(bool claimedHere) override;
  void recycle() override;
  // Written by the token's holder before determined_ (and before claimedForPull_ for a pull):
  int source_ = -1;
  SharedFrame::Message matchedHead_{};
  std::string pullError_;  // copying the payload from the sender failed: it is gone
};

class SharedP2P {
 public:
  SharedP2P(GlooBackend::Runtime& runtime, SyncMesh& mesh);
  ~SharedP2P();
  SharedP2P(const SharedP2P&) = delete;
  SharedP2P& operator=(const SharedP2P&) = delete;

  // Makes op's Work (a send or receive of tensor) and posts it; never waits for the receiver (a
  // full channel queues the message). Starts the listener at the group's first op.
  std::shared_ptr<Work> start(const Op& op, const Tensor& tensor,
                              const std::shared_ptr<detail::GroupTrace>& trace,
                              const std::shared_ptr<GlooBackend::Runtime>& runtime);
  // Stops the listener and fails the ops still in flight (StateError). Idempotent.
  void stop();
  // Fails every op in flight with reason (StateError when shutDown, else BackendError).
  void abortAll(const std::string& reason, bool shutDown);
  // Whether ops are in flight (the runtime's watcher looks for lost peers meanwhile).
  bool outstanding() const { return outstanding_.load(std::memory_order_relaxed) > 0; }
  const SyncMesh& mesh() const { return mesh_; }

  enum class Progress { Done, TimedOut, PeerLost };
  // Makes progress until work is determined (or aborted) or the deadline, which it checks every
  // 64 rounds however busy the channels are. Every 10 ms it looks at the op's peer (every peer
  // when peer < 0): PeerLost when one closed its channels or its process ended, with what
  // happened in *lost.
  Progress progressUntil(SharedWork& work, std::chrono::steady_clock::time_point deadline, int peer,
                         std::string* lost);
  // Forgets recv if it still waits for a head; false when one was delivered.
  bool withdraw(SharedRecv* recv);
  // The waiter of work, determined, lets the engine's hold go at once rather than at a later
  // sweep: the caller's next op then finds the Work back in its pool, however threads are
  // scheduled.
  void letGo(SharedWork& work);
  // Wakes the waits of aborted ops.
  void wakeWaiters();

 private:
  struct Queued {
    SharedFrame::Message message;
    std::vector<uint8_t> payload;
  };
  struct Link {
    SyncMesh::P2PLink channels;
    std::deque<Queued> queued;  // written in order once the channel has room
  };
  // A head no receive was posted for yet, with its payload. Slots are reused: their buffers stay.
  struct Kept {
    int source = -1;
    SharedFrame::Message head{};
    std::vector<uint8_t> eager;
  };
  // An intrusive list of ops (SharedWork::next_), in order.
  struct List {
    SharedWork* first = nullptr;
    SharedWork* last = nullptr;
    void push(SharedWork* work);
    // Takes out the first op for which match(op) holds; null when none does.
    template <typename Match>
    SharedWork* take(Match&& match);
  };

  // The progress token: tryAcquire takes it when free; release gives it back and, when ops came
  // into the inbox meanwhile, takes it again to take them in (true: it did, and holds it).
  bool tryAcquire() {
    uint32_t free = 0;
    return token_.compare_exchange_strong(free, 1, std::memory_order_acquire);
  }
  void acquire();  // spins (yielding) until it holds the token: for the rare paths only
  void release();
  // Puts request (an op to post) in the inbox, then makes progress if the token is free.
  void submit(SharedWork* request);
  // All under the token.
  void takeInbox();
  void postSend(SharedSend& send);
  void postRecv(SharedRecv& recv);
  // recv matched head from source: its eager payload into the tensor (fill) and the verdict
  // out, or, for a payload left in the sender's memory, recv joins the pulls.
  template <typename Fill>
  void deliver(SharedRecv& recv, int source, const SharedFrame::Message& head, Fill&& fill);
  // Writes what was queued and drains every channel; whether anything moved.
  bool poll();
  void write(int peer, const SharedFrame::Message& message, const void* payload, size_t bytes);
  void determine(SharedWork& work);
  void addOutstanding();
  // Copies the payloads of the pulls that are own's, or whose receive nobody runs (a receive
  // nobody waits for yet must still answer: its sender may be what this thread waits for), each
  // with the token given back meanwhile, so that one large receive holds up none of the rank's
  // other sends and receives; then determines the receive and answers. Whether it copied any.
  bool takePulls(SharedWork* own);
  // The determined ops: those completed lose the engine's hold; with unclaimed, those nobody
  // claimed yet are moved there (for the listener to complete, without the token); with one,
  // the first of them (a waiter completes it, so that ops nobody waits for still complete while
  // waiters keep the listener away).
  void sweepDetermined(std::vector<std::shared_ptr<SharedWork>>* unclaimed,
                       std::shared_ptr<SharedWork>* one = nullptr);
  // One round of progress with the token; false when it was taken.
  bool progressOnce(SharedWork* own, bool* moved);
  // Bumps the waiters' futex word, and wakes the ones asleep on it.
  void moved();
  std::string lostPeer(int peer);  // "" while peer is there
  void listen();
  void ensureStarted();
  // Whether a peer this rank sends to has messages queued for want of room.
  bool anyQueued() const;
  // Once stopping: fails every op the engine holds or has in its inbox (StateError) and lets it
  // go. Takes the token.
  void failAll();

  GlooBackend::Runtime& runtime_;
  const SyncMesh& mesh_;
  shm::Doorbell doorbell_;
  const std::chrono::nanoseconds spinFor_;  // SyncMesh::spinFor: a waiter's poll before it sleeps
  std::vector<int> peers_;
  std::vector<Link> links_;  // by rank

  alignas(64) std::atomic<uint32_t> token_{0};
  std::atomic<SharedWork*> inbox_{nullptr};  // a stack: taken whole, reversed
  // Waiters: how many poll, how many sleep on changed_ (bumped when ops move on), and when the
  // last one left (the listener stays away for kHandOver after).
  alignas(64) std::atomic<uint32_t> changed_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int> activeWaiters_{0};
  std::atomic<int64_t> lastWaiterNs_{0};
  std::atomic<int> outstanding_{0};  // ops posted and not yet determined (the holder writes it)

  // The token's holder's:
  List posted_;      // receives waiting for a head, in posting order
  List unanswered_;  // sends waiting for their verdict
  List pulls_;       // receives whose payload is to be copied from the sender
  List determined_;  // ops whose outcome is known, not yet released by the engine
  // Slots made up front, each with room for an eager payload this large.
  static constexpr size_t kKeptAhead = 8;
  static constexpr size_t kKeptEagerBytes = 256;
  std::vector<Kept> kept_;         // slots
  std::vector<size_t> keptOrder_;  // slots in use, in arrival order
  std::vector<size_t> keptFree_;   // slots not in use
  uint64_t nextId_ = 0;

  std::shared_ptr<detail::WorkPool<SharedSend>> sends_;
  std::shared_ptr<detail::WorkPool<SharedRecv>> recvs_;
  std::mutex listenerMutex_;  // starting the listener against stop()'s join
  std::thread listener_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
};

}  // namespace c10d::inline v1
