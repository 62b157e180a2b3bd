#include "backends/gloo/SharedPointToPoint.hpp"

#include <algorithm>
#include <cstring>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Signals.hpp"
#include "c10d/core/ThreadName.hpp"

namespace c10d::inline v0 {

namespace {

using Clock = std::chrono::steady_clock;
using Message = SharedFrame::Message;

// A waiter that sleeps in its reads (more ranks than cores), and the progress thread, poll this
// long before they leave the channels to the listener and wait to be told; a waiter with a core
// of its own polls until done.
constexpr std::chrono::microseconds kPollBeforeSleep{50};
// How often a wait looks at the clock and at its peer's process (a read of /proc).
constexpr std::chrono::milliseconds kLookInterval{10};
// The listener's sleep between rings: only a message queued for want of room needs it sooner,
// since nobody rings when a reader frees room.
constexpr std::chrono::milliseconds kListenerSleep{100};
constexpr std::chrono::milliseconds kRetryQueued{1};
// Between the ops of a waiter that polls, the listener stays out of the way: taking over after
// each op cost a thread wake-up per op, and, armed on the doorbell, a system call per message
// (one run at 2 ranks: 256 B sendrecv took 27.5 us p50 and 16 KiB 34.2 us, against 2.3 and 2.8
// us with this delay).
constexpr std::chrono::milliseconds kHandOver{2};

// Whole messages are in the channel when their head is: its payload never waits.
const shm::Waiting kNoWait{Clock::time_point::max(), 0, true};

}  // namespace

// ---- SharedP2P ----

SharedP2P::SharedP2P(GlooBackend::Runtime& runtime, SyncMesh& mesh)
    : runtime_(runtime), mesh_(mesh), doorbell_(mesh.p2pDoorbell()), spin_(mesh.busyPoll()) {
  links_.resize(runtime_.size);
  for (int r = 0; r < runtime_.size; ++r) {
    if (r == runtime_.rank) continue;
    peers_.push_back(r);
    links_[r].channels = mesh.p2pLink(r);
  }
}

SharedP2P::~SharedP2P() {
  stop();
}

void SharedP2P::ensureStarted() {
  if (started_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> guard(mutex_);
  if (listener_.joinable() || stopping_) return;
  listener_ = std::thread([this] { listen(); });
  started_.store(true, std::memory_order_release);
}

void SharedP2P::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  listenerChanged_.notify_all();
  doorbell_.ring();
  if (listener_.joinable() && listener_.get_id() != std::this_thread::get_id()) listener_.join();
  // Freed outside the lock.
  decltype(unanswered_) unanswered;
  decltype(matcher_) matcher;
  decltype(pulls_) pulls;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    unanswered.swap(unanswered_);
    std::swap(matcher, matcher_);
    pulls.swap(pulls_);
  }
}

void SharedP2P::wakeWaiters() {
  { std::lock_guard<std::mutex> guard(mutex_); }
  changed_.notify_all();
}

void SharedP2P::write(int peer, const Message& message, const void* payload, size_t bytes) {
  Link& link = links_[peer];
  if (link.queued.empty() &&
      link.channels.out->tryWrite(&message, sizeof message, payload, bytes)) {
    link.channels.doorbell->ring();
    return;
  }
  const auto* from = static_cast<const uint8_t*>(payload);
  link.queued.push_back({message, std::vector<uint8_t>(from, from + bytes)});
}

void SharedP2P::send(const std::shared_ptr<SharedSend>& send) {
  const uint64_t bytes = send->tensor_.nbytes();
  std::lock_guard<std::mutex> guard(mutex_);
  Message head{SharedFrame::kHead, 0, bytes, nextId_++, send->tag_, 0};
  if (SharedFrame::eagerBytes(bytes) == 0 && bytes > 0) {
    head.address = reinterpret_cast<uintptr_t>(send->tensor_.data());
  }
  unanswered_.emplace(head.id, send);
  write(send->peer_, head, send->tensor_.data(), SharedFrame::eagerBytes(bytes));
}

template <typename Fill>
void SharedP2P::deliver(const std::shared_ptr<SharedRecv>& recv, int source, const Message& head,
                        Fill&& fill) {
  const uint64_t taken = recv->tensor_.nbytes();
  const bool fits = head.bytes <= taken;
  recv->source_ = source;
  recv->matchedHead_ = head;
  if (head.address != 0 && fits) {
    pulls_.push_back(recv);
    return;
  }
  recv->matched_ = true;
  if (SharedFrame::eagerBytes(head.bytes) > 0 && fits)
    fill(static_cast<uint8_t*>(recv->tensor_.data()));
  write(source, Message{SharedFrame::kVerdict, head.bytes == taken ? 1u : 0u, taken, head.id, 0, 0},
        nullptr, 0);
}

bool SharedP2P::takePulls(std::unique_lock<std::mutex>& lock, const SharedRecv* own) {
  bool copied = false;
  for (;;) {
    auto it = std::find_if(pulls_.begin(), pulls_.end(), [&](const auto& recv) {
      return recv.get() == own || !recv->claimed();
    });
    if (it == pulls_.end()) return copied;
    std::shared_ptr<SharedRecv> recv = std::move(*it);
    pulls_.erase(it);
    const long pid = links_[recv->source_].channels.pid;
    const Message head = recv->matchedHead_;
    lock.unlock();
    // The tensor is this receive's alone until it completes; the sender keeps its memory until
    // the verdict.
    std::string error = shm::readProcessMemory(pid, head.address, recv->tensor_.data(), head.bytes);
    lock.lock();
    recv->matched_ = true;
    recv->pullError_ = std::move(error);
    if (recv->pullError_.empty()) {  // else the sender is gone: no verdict
      const uint64_t taken = recv->tensor_.nbytes();
      write(recv->source_,
            Message{SharedFrame::kVerdict, head.bytes == taken ? 1u : 0u, taken, head.id, 0, 0},
            nullptr, 0);
    }
    changed_.notify_all();
    copied = true;
  }
}

void SharedP2P::post(const std::shared_ptr<SharedRecv>& recv) {
  std::lock_guard<std::mutex> guard(mutex_);
  std::optional<Kept> kept = matcher_.post(recv, recv->peer_, recv->tag_);
  if (!kept) return;
  deliver(recv, kept->source, kept->header,
          [&](uint8_t* into) { std::memcpy(into, kept->eager.data(), kept->eager.size()); });
}

bool SharedP2P::withdraw(const SharedRecv* recv) {
  std::lock_guard<std::mutex> guard(mutex_);
  return matcher_.withdraw(recv);
}

bool SharedP2P::poll() {
  bool moved = false;
  for (int peer : peers_) {
    Link& link = links_[peer];
    while (!link.queued.empty()) {
      Queued& next = link.queued.front();
      if (!link.channels.out->tryWrite(&next.message, sizeof next.message, next.payload.data(),
                                       next.payload.size())) {
        break;
      }
      link.queued.pop_front();
      link.channels.doorbell->ring();
      moved = true;
    }
    Message message;
    while (link.channels.in->tryReadHeader(&message, sizeof message)) {
      moved = true;
      const size_t eager =
          message.kind == SharedFrame::kHead ? SharedFrame::eagerBytes(message.bytes) : 0;
      if (message.kind == SharedFrame::kVerdict) {
        link.channels.in->readPayload(0, kNoWait, [](const uint8_t*, size_t) {});
        auto it = unanswered_.find(message.id);
        if (it != unanswered_.end()) {
          it->second->answer_ = message;
          it->second->answered_ = true;
          unanswered_.erase(it);
        }
        continue;
      }
      std::shared_ptr<SharedRecv> recv = matcher_.match(peer, message.tag);
      if (!recv) {
        Kept kept{peer, message, std::vector<uint8_t>(eager)};
        uint8_t* into = kept.eager.data();
        link.channels.in->readPayload(eager, kNoWait, [&](const uint8_t* piece, size_t n) {
          std::memcpy(into, piece, n);
          into += n;
        });
        matcher_.keep(std::move(kept));
        continue;
      }
      bool filled = false;
      deliver(recv, peer, message, [&](uint8_t* into) {
        filled = true;
        link.channels.in->readPayload(eager, kNoWait, [&](const uint8_t* piece, size_t n) {
          std::memcpy(into, piece, n);
          into += n;
        });
      });
      if (!filled) link.channels.in->readPayload(eager, kNoWait, [](const uint8_t*, size_t) {});
    }
  }
  if (moved) changed_.notify_all();
  return moved;
}

std::string SharedP2P::lostPeer(int peer) {
  auto look = [&](int r) -> std::string {
    const SyncMesh::P2PLink& link = links_[r].channels;
    if (link.in->closed() || link.out->closed()) return mesh_.lossText(shm::Wait::Closed, r, false);
    if (shm::processEnded(link.pid)) return mesh_.lossText(shm::Wait::PeerEnded, r, false);
    return "";
  };
  if (peer >= 0) return look(peer);
  for (int r : peers_) {
    if (std::string lost = look(r); !lost.empty()) return lost;
  }
  return "";
}

template <typename Done>
SharedP2P::Progress SharedP2P::progressUntil(Done&& done, Clock::time_point deadline, int peer,
                                             std::string* lost, const SharedRecv* own) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++activeWaiters_;
  bool active = true;
  // Going to sleep, this waiter leaves the channels to the listener at once.
  auto passive = [&] {
    if (!active) return;
    active = false;
    --activeWaiters_;
    ++sleepingWaiters_;
    listenerChanged_.notify_one();
  };
  // Leaving, it wakes the listener only for waiters that sleep: otherwise the listener takes
  // over after kHandOver without a waiter.
  auto leave = [&](Progress progress) {
    if (active) {
      --activeWaiters_;
      if (sleepingWaiters_ > 0) listenerChanged_.notify_one();
    } else {
      --sleepingWaiters_;
    }
    lastWaiter_ = Clock::now();
    return progress;
  };
  auto lastLook = Clock::now();
  const bool spin = spin_ && !GlooBackend::Runtime::onProgressThread();
  const auto pollUntil = spin ? Clock::time_point::max() : lastLook + kPollBeforeSleep;
  for (unsigned round = 1;; ++round) {
    if (done()) break;
    // Asleep, it still copies its own payload: nobody else does.
    const bool copied = !pulls_.empty() && takePulls(lock, own);
    if (done()) break;
    if (active) {
      const bool moved = poll() || copied;
      // Every 64th round goes on to the clock and the peer, even while others' messages flow.
      if (round % 64 != 0) {
        if (!moved) {
          lock.unlock();
          shm::cpuRelax();
          lock.lock();
        }
        continue;
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) return leave(Progress::TimedOut);
    if (now - lastLook >= kLookInterval) {
      lastLook = now;
      *lost = lostPeer(peer);
      if (!lost->empty()) return leave(Progress::PeerLost);
    }
    if (active && now >= pollUntil) passive();
    if (!active) changed_.wait_until(lock, std::min(deadline, now + kLookInterval));
  }
  return leave(Progress::Done);
}

void SharedP2P::listen() {
  detail::nameThisThread("c10d-gloo-shm");
  detail::blockSigpipeInThisThread();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // Timed: a waiter that finishes does not say so (see kHandOver).
    if (activeWaiters_ > 0) {
      listenerChanged_.wait_for(lock, kHandOver);
      continue;
    }
    if (const auto handOver = lastWaiter_ + kHandOver;
        sleepingWaiters_ == 0 && Clock::now() < handOver) {
      listenerChanged_.wait_until(lock, handOver);
      continue;
    }
    if (poll() || takePulls(lock, nullptr)) continue;
    const uint32_t armed = doorbell_.arm();
    const bool moved = poll() || takePulls(lock, nullptr);
    const bool queued =
        std::any_of(peers_.begin(), peers_.end(), [&](int r) { return !links_[r].queued.empty(); });
    lock.unlock();
    if (!moved) doorbell_.sleep(armed, queued ? kRetryQueued : kListenerSleep);
    doorbell_.disarm();
    lock.lock();
  }
}

// ---- SharedWork ----

void SharedWork::aborting(bool /*claimedHere*/) {
  aborted_.store(true);
  runtime_->sharedP2p->wakeWaiters();
}

// ---- SharedSend ----

void SharedSend::run(Clock::time_point deadline) {
  SharedP2P& engine = *runtime_->sharedP2p;
  std::string lost;
  const SharedP2P::Progress progress =
      engine.progressUntil([&] { return answered_ || aborted_.load(); }, deadline, peer_, &lost);
  if (aborted_.load()) {
    std::lock_guard<std::mutex> guard(mutex_);
    std::rethrow_exception(abortError(abortReason_));
  }
  if (progress == SharedP2P::Progress::TimedOut) {
    runtime_->fail(description(), detail::concat("Timed out waiting ", timeout().count(),
                                                 "ms for a matching recv"));
  }
  if (progress == SharedP2P::Progress::PeerLost) runtime_->fail(description(), lost);
  C10D_CHECK(answer_.matched == 1, InvalidArgument,
             sizesDisagree(tensor_.nbytes(), answer_.bytes, runtime_->rank, peer_));
}

// ---- SharedRecv ----

void SharedRecv::aborting(bool claimedHere) {
  // Failed here: no head may be delivered into it any more.
  if (claimedHere) runtime_->sharedP2p->withdraw(this);
  SharedWork::aborting(claimedHere);
}

void SharedRecv::run(Clock::time_point deadline) {
  SharedP2P& engine = *runtime_->sharedP2p;
  std::string lost;
  SharedP2P::Progress progress = engine.progressUntil(
      [&] { return matched_ || aborted_.load(); }, deadline, peer_, &lost, this);
  if (progress != SharedP2P::Progress::Done || aborted_.load()) {
    const bool withdrawn = engine.withdraw(this);
    if (aborted_.load()) {
      std::lock_guard<std::mutex> guard(mutex_);
      std::rethrow_exception(abortError(abortReason_));
    }
    // As Gloo's own waits: a timeout or a lost peer is the group's failure. (Not withdrawn: a
    // head was delivered meanwhile, and the receive goes on.)
    if (withdrawn && progress == SharedP2P::Progress::PeerLost) runtime_->fail(description(), lost);
    if (withdrawn) {
      runtime_->fail(description(), detail::concat("Timed out waiting ", timeout().count(),
                                                   "ms for a matching send"));
    }
  }
  setSourceRank(source_);
  const uint64_t taken = tensor_.nbytes();
  if (!pullError_.empty()) {
    runtime_->fail(description(),
                   detail::concat(engine.mesh().lossText(shm::Wait::Closed, source_, false), ": ",
                                  pullError_));
  }
  C10D_CHECK(matchedHead_.bytes == taken, InvalidArgument,
             sizesDisagree(matchedHead_.bytes, taken, source_, runtime_->rank));
}

}  // namespace c10d::inline v0
