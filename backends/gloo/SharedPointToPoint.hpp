#pragma once

// Private to backends/gloo: send and recv when the whole group shares one host's memory and every
// rank can read every other's (SyncMesh::pullsEverywhere); elsewhere PointToPoint.hpp's path over
// Gloo. Messages go on the SyncMesh's point-to-point channels, one each way per pair (apart from
// the collectives' channels, since they come in any order):
//
//   head     sender -> receiver: size, tag and the sender's message id; the payload itself when
//            it is at most kEagerBytes, else its address in the sender, from which the receiver
//            copies it straight into its tensor (process_vm_readv) once it matched the head:
//            outside the engine's mutex, by the receive's own wait, or by any thread making
//            progress when nobody runs that receive
//   verdict  receiver -> sender once the payload is in: the size the receive takes and whether
//            the two were equal; the send completes on it
//
// Heads match receives as in PointToPoint.hpp (source and tag, in posting order, any source
// allowed), with the same errors for sizes that differ. Whoever waits for an op makes progress
// itself, polling every channel, so a small send/recv pays no thread hand-off; while nobody
// does, a listener thread (c10d-gloo-shm) makes it, asleep on the rank's doorbell until a peer
// writes. Every channel is drained as it is read (a head no receive was posted for yet is kept,
// with its payload), and a message that finds no room waits in a queue for a later poll, so two
// ranks writing to each other never wait on each other.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/gloo/PointToPoint.hpp"
#include "backends/gloo/SyncMesh.hpp"

namespace c10d::inline v0 {

struct SharedFrame {
  // Payloads up to this travel in the head: two copies through the channel, no system call.
  // Larger ones are read from the sender's memory: one copy, one system call. Measured with 2
  // ranks (sendrecv p50, medians of 3 alternating runs): at 16 KiB 3.9 us in the head against
  // 6.7 read; at 32 KiB 4.2-4.4 against 7.9; at 48 KiB 5.8 against 9.6. As large as the
  // channel allows with four heads in flight.
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

// A send or receive over shared memory: an abort wakes the engine's waiters, whose polling
// looks at aborted_.
class SharedWork : public P2PWork {
 public:
  using P2PWork::P2PWork;

 protected:
  void aborting(bool claimedHere) override;
  std::atomic<bool> aborted_{false};
};

class SharedSend : public SharedWork {
 public:
  using SharedWork::SharedWork;

 private:
  friend class SharedP2P;
  void run(Clock::time_point deadline) override;
  // Under the engine's mutex:
  bool answered_ = false;
  SharedFrame::Message answer_{};  // the receiver's verdict
};

class SharedRecv : public SharedWork {
 public:
  using SharedWork::SharedWork;

 private:
  friend class SharedP2P;
  void run(Clock::time_point deadline) override;
  void aborting(bool claimedHere) override;
  // Under the engine's mutex:
  bool matched_ = false;
  // A receive that matched a head whose payload is still in the sender waits in
  // SharedP2P::pulls_ (matched_ false) until a thread copies it and sends the verdict.
  bool claimed() const { return claimed_.load(); }  // someone runs (or ran) this receive
  std::string pullError_;  // copying the payload from the sender failed: it is gone
  int source_ = -1;
  SharedFrame::Message matchedHead_{};
};

class SharedP2P {
 public:
  SharedP2P(GlooBackend::Runtime& runtime, SyncMesh& mesh);
  ~SharedP2P();
  SharedP2P(const SharedP2P&) = delete;
  SharedP2P& operator=(const SharedP2P&) = delete;

  // Starts the listener, once: at the group's first send or receive, so a group that only runs
  // collectives has no thread for it.
  void ensureStarted();
  // Stops the listener and forgets the ops still waiting (they hold the runtime, which holds
  // this). Idempotent.
  void stop();
  // Posts send's head; never waits for the receiver (a full channel queues it).
  void send(const std::shared_ptr<SharedSend>& send);
  // Matches recv with the first head kept for its source and tag, else keeps it for one.
  void post(const std::shared_ptr<SharedRecv>& recv);
  // Forgets recv if it still waits for a head; false when one was delivered.
  bool withdraw(const SharedRecv* recv);
  // Wakes the waits of aborted ops.
  void wakeWaiters();
  const SyncMesh& mesh() const { return mesh_; }

  enum class Progress { Done, TimedOut, PeerLost };
  // Makes progress until done() holds (looked at under the engine's mutex) or the deadline,
  // which it checks every 64 rounds however busy the channels are. Every 10 ms it looks at the
  // op's peer (every peer when peer < 0): PeerLost when one closed
  // its channels or its process ended, with what happened in *lost. own: the receive this wait
  // runs, whose payload it copies (takePulls).
  template <typename Done>
  Progress progressUntil(Done&& done, std::chrono::steady_clock::time_point deadline, int peer,
                         std::string* lost, const SharedRecv* own = nullptr);

 private:
  struct Queued {
    SharedFrame::Message message;
    std::vector<uint8_t> payload;
  };
  struct Link {
    SyncMesh::P2PLink channels;
    std::deque<Queued> queued;  // written in order once the channel has room
  };
  using Kept = P2PMatcher<SharedRecv, SharedFrame::Message>::Head;
  // All under mutex_. poll: writes what was queued and drains every channel; whether anything
  // moved.
  bool poll();
  void write(int peer, const SharedFrame::Message& message, const void* payload, size_t bytes);
  // recv matched head: fill copies its eager payload into the tensor and the verdict goes; or
  // the payload is left in the sender's memory and recv joins pulls_.
  template <typename Fill>
  void deliver(const std::shared_ptr<SharedRecv>& recv, int source,
               const SharedFrame::Message& head, Fill&& fill);
  // Copies the payloads of pulls_ that are own's, or whose receive nobody runs (a receive
  // nobody waits for yet must still answer: its sender may be what this thread waits for),
  // each with the mutex released, so that one large receive holds up none of the rank's other
  // sends and receives; then completes the match and answers. lock holds mutex_ on entry and
  // return. Whether it copied any.
  bool takePulls(std::unique_lock<std::mutex>& lock, const SharedRecv* own);
  std::string lostPeer(int peer);  // "" while peer is there
  void listen();

  GlooBackend::Runtime& runtime_;
  const SyncMesh& mesh_;
  shm::Doorbell doorbell_;
  const bool spin_;
  std::vector<int> peers_;
  std::vector<Link> links_;  // by rank

  std::mutex mutex_;
  std::condition_variable changed_;  // an op moved on, or was aborted
  std::condition_variable listenerChanged_;
  int activeWaiters_ = 0;    // waiters polling: the listener leaves the channels to them
  int sleepingWaiters_ = 0;  // waiters that stopped polling: the listener works for them
  std::chrono::steady_clock::time_point lastWaiter_;  // when the last one left
  P2PMatcher<SharedRecv, SharedFrame::Message> matcher_;
  std::unordered_map<uint64_t, std::shared_ptr<SharedSend>> unanswered_;  // by message id
  std::deque<std::shared_ptr<SharedRecv>> pulls_;  // matched, the payload still to be copied
  uint64_t nextId_ = 0;
  std::thread listener_;
  std::atomic<bool> started_{false};  // listener_ started: ops need not lock to know
  bool stopping_ = false;
};

}  // namespace c10d::inline v0
