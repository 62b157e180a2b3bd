#pragma once

// Private to backends/gloo: send and recv, with sizes checked on both sides.
//
// Gloo moves a message into whatever receive its slot matches: a larger message aborts the
// receiving process (an enforce on Gloo's device thread) and a smaller one leaves the rest of
// the receive as it was. So our messages are framed, and matched by us as MPI does:
//
//   head     on one slot of the group (kHeadSlot): a Header (size, tag, the sender's message
//            id), then up to kEagerBytes of the payload, copied through staging memory
//   bulk     only when the payload is larger: the rest, zero-copy from and into the tensors,
//            on a slot made of the id
//   verdict  from the receiver once it matched the head: the size it takes and whether the two
//            were equal, on a slot made of the id
//
// From a group's first send or receive on, every rank keeps kPostedHeads receives for heads
// posted, from any peer, each with room for any head, so Gloo never sees a size it cannot take. A
// listener thread per group (c10d-gloo-match) reads each head, reposts its buffer and matches the
// head with the receives posted for its source and tag in posting order, or keeps it until one is
// posted. Matching posts the bulk's receive (into the tensor, or into memory it drops when the
// message is too large) and sends the verdict. Nothing of this waits for the other rank to wait: a
// send completes once its receive is posted there and the verdict is back, and the listener blocks
// on nothing but heads. Sizes that differ fail both Works with InvalidArgument naming both sizes,
// the ranks and the tag, and the group stays usable.

#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/gloo/GlooRuntime.hpp"
#include "c10d/Work.hpp"
#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {

struct P2PFrame {
  // Up to this much payload travels in the head, copied through staging on both sides; the
  // rest goes zero-copy but waits for the receiver to have matched the head (one more round
  // trip), which made a 256 KiB sendrecv slower than with all of it in the head (measured:
  // docs/performance-history.md, "Figures that lived in code comments"). Each rank keeps
  // kPostedHeads of these buffers per group.
  static constexpr size_t kEagerBytes = 256 * 1024;
  struct Header {
    uint64_t bytes;  // the whole payload
    uint64_t id;     // the sender's message number: names the bulk and verdict slots
    int64_t tag;
  };
  struct Verdict {
    uint64_t receiverBytes;  // what the receive takes
    uint64_t matched;        // 1 when the sizes were equal
  };
  static constexpr size_t kHeadRoom = sizeof(Header) + kEagerBytes;
  // Collectives' slots have prefixes 0x01 to 0x08 << 56 (Slot::build); ours 0xE0 to 0xE2.
  static constexpr uint64_t kHeadSlot = uint64_t{0xE2} << 56;
  static constexpr uint64_t kIdMask = (uint64_t{1} << 56) - 1;
  static uint64_t bulkSlot(uint64_t id) { return uint64_t{0xE0} << 56 | (id & kIdMask); }
  static uint64_t verdictSlot(uint64_t id) { return uint64_t{0xE1} << 56 | (id & kIdMask); }
};

// Receives posted and heads that came before their receive, matched as MPI matches them: by
// source (any, for a receive's source < 0) and tag, receives in posting order and heads in
// arrival order. Header has `int64_t tag`. Not thread-safe: its engine locks.
template <typename Recv, typename Header>
class P2PMatcher {
 public:
  // A head kept until a receive matches it, with its payload when that came with it.
  struct Head {
    int source;
    Header header;
    std::vector<uint8_t> eager;
  };

  // The first kept head recv matches, taken out; else recv is kept for one (nullopt).
  std::optional<Head> post(std::shared_ptr<Recv> recv, int source, int tag) {
    auto it = std::find_if(kept_.begin(), kept_.end(), [&](const Head& h) {
      return (source < 0 || h.source == source) && h.header.tag == tag;
    });
    if (it == kept_.end()) {
      posted_.push_back({std::move(recv), source, tag});
      return std::nullopt;
    }
    Head head = std::move(*it);
    kept_.erase(it);
    return head;
  }
  // The first posted receive a head from source with tag matches, taken out; else null (keep
  // the head with keep()).
  std::shared_ptr<Recv> match(int source, int64_t tag) {
    auto it = std::find_if(posted_.begin(), posted_.end(), [&](const Posted& p) {
      return (p.source < 0 || p.source == source) && p.tag == tag;
    });
    if (it == posted_.end()) return nullptr;
    std::shared_ptr<Recv> recv = std::move(it->recv);
    posted_.erase(it);
    return recv;
  }
  void keep(Head head) { kept_.push_back(std::move(head)); }
  // Forgets recv if it still waits for a head; false when one was (or is being) delivered.
  bool withdraw(const Recv* recv) {
    auto it = std::find_if(posted_.begin(), posted_.end(),
                           [&](const Posted& p) { return p.recv.get() == recv; });
    if (it == posted_.end()) return false;
    posted_.erase(it);
    return true;
  }

 private:
  struct Posted {
    std::shared_ptr<Recv> recv;
    int source;
    int tag;
  };
  std::deque<Posted> posted_;
  std::deque<Head> kept_;
};

// A send or receive. Whoever claims it first runs its stages (waits on Gloo): the caller in
// Work::wait, or the runtime's progress thread.
class P2PWork : public Work {
 public:
  // op: the send or receive of tensor (its peer and tag).
  P2PWork(const Op& op, std::shared_ptr<detail::GroupTrace> trace, Tensor tensor,
          std::shared_ptr<GlooBackend::Runtime> runtime);
  ~P2PWork() override;
  // The tensor the op sends or receives into (a pooled Work's, per op).
  void setTensor(const Tensor& tensor);

  // Runs the stages unless someone else claimed the work; then completes it.
  void completeIfUnclaimed();
  // Wakes a wait, or fails the work when nobody waits; reason ends its error, a StateError when
  // the group shut down (shutDown), else a BackendError.
  void abortWait(const std::string& reason, bool shutDown);

 protected:
  using Clock = std::chrono::steady_clock;
  using Staging = GlooBackend::Runtime::Staging;
  // A Work to be rebound to each op it runs (c10d/WorkPool.hpp).
  P2PWork(std::shared_ptr<detail::GroupTrace> trace, std::shared_ptr<GlooBackend::Runtime> runtime);
  void rebind(const Op& op) override;
  void recycle() override;
  void beforeWait() override { completeIfUnclaimed(); }
  // The stages after posting; throws the op's error.
  virtual void run(Clock::time_point deadline) = 0;
  // Called by abortWait once the reason is set; claimedHere: the work fails right after.
  virtual void aborting(bool /*claimedHere*/) {}
  // Waits for buffer's send or receive; BackendError with the abort reason when abortWait woke
  // it; Gloo's errors (a timeout, a lost peer) become the group's failure through guarded.
  void waitFor(gloo::transport::UnboundBuffer& buffer, bool send, int* peer,
               Clock::time_point deadline);
  std::string sizesDisagree(uint64_t sent, uint64_t taken, int sender, int receiver) const;
  // The error of an abort, from abortReason_ (mutex_ held or the reason already read).
  std::exception_ptr abortError(const std::string& reason) const;

  Tensor tensor_;
  int peer_ = -1;  // < 0: any source (a receive)
  int tag_ = 0;
  std::shared_ptr<GlooBackend::Runtime> runtime_;
  std::unique_ptr<Staging> head_;
  std::unique_ptr<Staging> verdict_;
  std::unique_ptr<gloo::transport::UnboundBuffer> bulk_;
  std::mutex mutex_;  // guards the members below, and the receive's match state
  gloo::transport::UnboundBuffer* waiting_ = nullptr;
  bool waitingForSend_ = false;
  std::string abortReason_;
  bool abortedByShutdown_ = false;
  std::atomic<bool> claimed_{false};
};

class P2PSend : public P2PWork {
 public:
  using P2PWork::P2PWork;
  // Posts the verdict's receive, the head and the bulk; call under Runtime::guarded.
  void post(uint64_t id);

 private:
  void run(Clock::time_point deadline) override;
  uint64_t id_ = 0;
};

class P2PRecv : public P2PWork {
 public:
  using P2PWork::P2PWork;
  // The matched head: fills the tensor with what came in the head, posts the bulk's receive and
  // sends the verdict. Called once, by the listener or the posting thread, never blocks.
  void deliver(int source, const P2PFrame::Header& header, const uint8_t* eager);

 private:
  void run(Clock::time_point deadline) override;
  void aborting(bool claimedHere) override;
  std::condition_variable matchedChanged_;
  bool matched_ = false;
  std::exception_ptr matchError_;  // posting the bulk or the verdict failed
  int source_ = -1;
  P2PFrame::Header header_{};
  std::vector<uint8_t> discarded_;  // where a too large message's bulk goes
};

// The group's matching of heads with receives, and its listener thread.
class P2PEngine {
 public:
  // How many head receives stay posted: heads from several peers land while one is matched.
  static constexpr int kPostedHeads = 4;

  explicit P2PEngine(GlooBackend::Runtime& runtime);
  ~P2PEngine();
  P2PEngine(const P2PEngine&) = delete;
  P2PEngine& operator=(const P2PEngine&) = delete;

  // Posts the head receives and starts the listener, once; later calls return at once. Called
  // at the group's first send or receive, so a group that only runs collectives keeps neither
  // the thread nor the head buffers (kPostedHeads x kHeadRoom bytes). Call under guarded.
  void ensureStarted();
  bool started() const { return started_.load(std::memory_order_acquire); }
  // Stops the listener. Idempotent.
  void stop();
  // The number of this rank's next message.
  uint64_t nextId() { return nextId_.fetch_add(1, std::memory_order_relaxed); }
  // Matches recv with the first head kept for its source and tag, else keeps it for one.
  void post(const std::shared_ptr<P2PRecv>& recv, int source, int tag);
  // Forgets recv if it still waits for a head; false when a head was (or is being) delivered.
  bool withdraw(const P2PRecv* recv);

 private:
  using Head = P2PMatcher<P2PRecv, P2PFrame::Header>::Head;
  void listen();

  GlooBackend::Runtime& runtime_;
  std::vector<int> peers_;
  // Posted in this order and reposted as each is read, so Gloo fills them in turn: the next
  // head is in heads_[next_]. Fixed after start(), so stop() may reach them from another thread.
  std::vector<std::unique_ptr<GlooBackend::Runtime::Staging>> heads_;
  size_t next_ = 0;  // the listener's
  std::thread listener_;
  std::atomic<bool> stopping_{false};
  std::mutex stopMutex_;              // guards starting and stopping
  std::atomic<bool> started_{false};  // read without the mutex on every operation
  std::atomic<uint64_t> nextId_{0};
  std::mutex mutex_;
  P2PMatcher<P2PRecv, P2PFrame::Header> matcher_;
};

}  // namespace c10d::inline v1
